"""HTTPS_PROXY: an https provider is called through the proxy, and its host is still checked first (SEC-2).

A real proxy on loopback (`ConnectProxy`: CONNECT, then bytes both ways) in front of the scripted fake
provider served over TLS on loopback, with a certificate for localhost that this test trusts (SSL_CERT_FILE,
read when the provider builds its TLS context). What the proxy was asked for is what the desk sent.
"""

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from dataclasses import replace
from pathlib import Path

import pytest
import uvicorn

from desk.agent.core.provider import AIUnavailable, Provider, TextDelta
from desk.config import Settings
from tests.agent.test_egress import ChangingResolver
from tests.fake_provider import FakeProvider, Turn

TLS_DIR = Path(__file__).parent / "tls"  # a self-signed certificate for localhost and 127.0.0.1, for tests only
MESSAGES = [{"role": "user", "content": "Hello"}]
OPTIONS = {"api_key": "k", "model": "m", "max_output_tokens": 64, "price_in": 0.0, "price_out": 0.0}


class ConnectProxy:
    """A tiny HTTP proxy: answers CONNECT host:port by connecting there and relaying; records every request line."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.connections = 0
        self.url = ""
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            line = head.split(b"\r\n", 1)[0].decode()
            self.requests.append(line)
            method, target, _ = line.split(" ", 2)
            if method != "CONNECT":
                writer.write(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
                return
            host, port = target.rsplit(":", 1)
            upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


@pytest.fixture
def tls_port(fake_provider: FakeProvider) -> Iterator[int]:
    """The scripted fake provider served over TLS too, on a port of its own on loopback."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        fake_provider,
        lifespan="off",
        access_log=False,
        log_config=None,
        ssl_certfile=str(TLS_DIR / "localhost.pem"),
        ssl_keyfile=str(TLS_DIR / "localhost.key"),
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the TLS fake provider did not start"
        time.sleep(0.01)
    yield sock.getsockname()[1]
    server.should_exit = True
    thread.join(timeout=5)


@pytest.fixture
async def proxy(monkeypatch) -> AsyncIterator[ConnectProxy]:
    monkeypatch.setenv("SSL_CERT_FILE", str(TLS_DIR / "localhost.pem"))  # trusted by the providers made here
    running = ConnectProxy()
    await running.start()
    yield running
    await running.stop()


@pytest.fixture
async def providers() -> AsyncIterator[list[Provider]]:
    made: list[Provider] = []
    yield made
    for provider in made:
        await provider.aclose()


async def call(provider: Provider) -> list:
    async with aclosing(provider.stream(MESSAGES, [])) as events:
        return [event async for event in events]


async def test_an_https_provider_is_called_through_the_proxy_named_by_https_proxy(
    fake_provider: FakeProvider, proxy: ConnectProxy, tls_port: int, providers
):
    settings = Settings(
        ai_enabled=False,
        ai_base_url=f"https://localhost:{tls_port}/v1",
        ai_api_key="k",
        ai_allow_private_base_url=True,  # the fake is on loopback
        https_proxy=proxy.url,
    )
    providers.append(Provider.from_settings(settings))
    fake_provider.script(Turn.text("Through the proxy"))

    events = await call(providers[0])

    assert "".join(event.text for event in events if isinstance(event, TextDelta)) == "Through the proxy"
    assert proxy.requests == [f"CONNECT localhost:{tls_port} HTTP/1.1"]
    assert fake_provider.headers[0]["authorization"] == "Bearer k"  # inside the tunnel: the proxy never saw it


async def test_through_the_proxy_a_host_that_resolves_privately_is_refused_before_the_proxy_hears_of_it(
    fake_provider: FakeProvider, proxy: ConnectProxy, tls_port: int, providers
):
    resolver = ChangingResolver(["127.0.0.1"])
    url = f"https://localhost:{tls_port}/v1"
    providers.append(Provider(base_url=url, resolver=resolver, allow_private=False, proxy=proxy.url, **OPTIONS))

    with pytest.raises(AIUnavailable) as caught:
        await call(providers[0])

    assert caught.value.reached is False and caught.value.transient is True
    assert resolver.asked == [("localhost", tls_port)]  # the provider's host, not the proxy's
    assert proxy.connections == 0
    assert fake_provider.requests == []


async def test_through_the_proxy_each_new_connection_checks_the_provider_host_again(
    fake_provider: FakeProvider, proxy: ConnectProxy, tls_port: int, providers
):
    # public at first, loopback a moment later (a rebinding name): the second connection is refused
    resolver = ChangingResolver(["93.184.216.34"], ["127.0.0.1"])
    url = f"https://localhost:{tls_port}/v1"
    providers.append(Provider(base_url=url, resolver=resolver, allow_private=False, proxy=proxy.url, **OPTIONS))
    closing = Turn.text("First")
    fake_provider.script(replace(closing, headers=(*closing.headers, ("connection", "close"))))

    await call(providers[0])
    with pytest.raises(AIUnavailable):
        await call(providers[0])

    assert len(resolver.asked) == 2
    assert proxy.connections == 1
    assert len(fake_provider.requests) == 1


async def test_a_plain_http_provider_is_not_sent_through_the_proxy(
    fake_provider: FakeProvider, proxy: ConnectProxy, providers
):
    resolver = ChangingResolver(["127.0.0.1"])
    providers.append(
        Provider(base_url=fake_provider.url, resolver=resolver, allow_private=True, proxy=proxy.url, **OPTIONS)
    )
    fake_provider.script(Turn.text("Direct"))

    await call(providers[0])

    assert proxy.connections == 0
    assert len(fake_provider.requests) == 1
