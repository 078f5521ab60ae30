"""SEC-2 on every connection: the provider's host is resolved by us, checked, and connected to by address.

`AI_BASE_URL` is checked once at boot (desk/config.py), but a name can be made to answer differently
later (DNS rebinding: a public address at boot, 169.254.169.254 or 127.0.0.1 a minute on). So the
provider's HTTP client connects through `CheckedBackend`: each new connection resolves the host,
refuses it when any answer is private, loopback or link-local (unless AI_ALLOW_PRIVATE_BASE_URL), and
connects to an address it checked. TLS still names the host (SNI and certificate check), and the Host
header is the URL's, because httpcore takes both from the request, not from where the socket goes.

Through a proxy (HTTPS_PROXY, for an https provider only; no other proxy variable is read): the desk
connects to the proxy, which the operator chose and which is usually on a private address, so the proxy's
own address is not checked. The provider's host still is: before each new connection to the proxy,
`ProxiedBackend` resolves the provider's host itself and refuses it as above, and only then asks the proxy
to CONNECT to it by name. The name is sent, not the address we checked, because TLS must name the host and
httpcore's tunnel takes the name it verifies from the CONNECT target; so the proxy resolves the name once
more, and a name that changes its answer between our lookup and the proxy's could still slip through. The
check keeps out every name that answers privately when we ask; the proxy's own rules are the last line.
"""

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from urllib.parse import urlsplit

import httpcore
import httpx

Resolver = Callable[[str, int], Awaitable[list[str]]]


class RefusedAddress(httpcore.ConnectError):
    """The provider's host now answers with an address the desk may not call."""


async def resolve(host: str, port: int) -> list[str]:
    """The addresses `host` has now, from the system's resolver (as httpx would have asked)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


def internal(address: str) -> bool:
    """Private, loopback, link-local or otherwise not on the public internet (the boot check's rule)."""
    return not ipaddress.ip_address(address.split("%", maxsplit=1)[0]).is_global


def client(
    *,
    base_url: str,
    headers: dict[str, str],
    timeout: httpx.Timeout,
    allow_private: bool,
    resolver: Resolver = resolve,
    proxy: str | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncClient:
    """The provider's HTTP client: redirects never followed, each connection checked (through `proxy` for an https
    provider). `transport` replaces the checked one (a test's)."""
    if transport is None:
        checked = CheckedBackend(allow_private=allow_private, resolver=resolver)
        parts = urlsplit(base_url)
        via = proxy if proxy and parts.scheme == "https" else None
        transport = CheckedTransport(checked, proxy=via, target=(parts.hostname or "", parts.port or 443))
    # follow_redirects=False: SEC-2, a redirect could walk the key to another host
    return httpx.AsyncClient(headers=headers, timeout=timeout, follow_redirects=False, transport=transport)


class CheckedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, but a TCP connection goes only to an address that passed the check."""

    def __init__(self, *, allow_private: bool, resolver: Resolver = resolve) -> None:
        self.allow_private = allow_private
        self.resolver = resolver
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self.check(host, port)
        failure: Exception | None = None
        for address in addresses:  # as a resolver's answer is meant: the first that takes the connection
            try:
                return await self.inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                failure = error
        assert failure is not None
        raise failure

    async def check(self, host: str, port: int) -> list[str]:
        """The addresses `host` has now, every one allowed; else the connection is refused (a ConnectError)."""
        try:
            addresses = await self.resolver(host, port)
        except OSError as error:
            raise httpcore.ConnectError(f"could not resolve the provider's host ({type(error).__name__})") from None
        if not addresses:
            raise httpcore.ConnectError("the provider's host has no address")
        if not self.allow_private and any(internal(address) for address in addresses):
            raise RefusedAddress("the provider's host resolves to a private, loopback or link-local address")
        return addresses

    async def connect_unix_socket(self, *args: object, **kwargs: object) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("the provider is reached over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class ProxiedBackend(httpcore.AsyncNetworkBackend):
    """Connections to the proxy, each opened only once the provider's host (`target`) has passed the check."""

    def __init__(self, checked: CheckedBackend, target: tuple[str, int]) -> None:
        self.checked, self.target = checked, target

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        await self.checked.check(*self.target)  # the provider's host; `host` is the proxy's own
        return await self.checked.inner.connect_tcp(host, port, timeout, local_address, socket_options)

    async def connect_unix_socket(self, *args: object, **kwargs: object) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("the proxy is reached over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self.checked.sleep(seconds)


class CheckedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport with its connection pool on a `CheckedBackend`, or through `proxy` on a
    `ProxiedBackend` that checks `target`, the provider's host and port."""

    def __init__(
        self, backend: CheckedBackend, *, proxy: str | None = None, target: tuple[str, int] | None = None
    ) -> None:
        tls = httpx.create_ssl_context()  # once: building one costs ~0.15 s
        super().__init__(verify=tls, trust_env=False)
        # httpx takes no network backend: the same pool it builds, given ours (its one attribute we touch;
        # tests/agent/test_egress.py fails if a new httpx stops using it).
        if proxy is None:
            self._pool = httpcore.AsyncConnectionPool(ssl_context=tls, network_backend=backend)
            return
        assert target is not None, "a proxied transport checks the provider's host: name it"
        via = httpx.Proxy(proxy)  # as httpx builds its proxy pool (its auth and headers from the URL)
        url = httpcore.URL(scheme=via.url.raw_scheme, host=via.url.raw_host, port=via.url.port, target=b"/")
        self._pool = httpcore.AsyncHTTPProxy(
            proxy_url=url,
            proxy_auth=via.raw_auth,
            proxy_headers=via.headers.raw,
            ssl_context=tls,
            proxy_ssl_context=tls if via.url.scheme == "https" else None,
            network_backend=ProxiedBackend(backend, target),
        )


def loggable(url: str) -> str:
    """scheme://host[:port]/path: no userinfo or query, which could hold credentials."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}{parts.path}"
