"""SEC-2 on every connection: the provider's host is resolved by us, checked, and connected to by address.

`AI_BASE_URL` is checked once at boot (desk/config.py), but a name can be made to answer differently
later (DNS rebinding: a public address at boot, 169.254.169.254 or 127.0.0.1 a minute on). So the
provider's HTTP client connects through `CheckedBackend`: each new connection resolves the host,
refuses it when any answer is private, loopback or link-local (unless AI_ALLOW_PRIVATE_BASE_URL), and
connects to an address it checked. TLS still names the host (SNI and certificate check), and the Host
header is the URL's, because httpcore takes both from the request, not from where the socket goes.
A proxy from the environment is not used for the provider: it would resolve the name itself, unchecked.
"""

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable

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


class CheckedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, but a TCP connection goes only to an address that passed the check."""

    def __init__(self, *, allow_private: bool, resolver: Resolver = resolve) -> None:
        self.allow_private = allow_private
        self.resolver = resolver
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            addresses = await self.resolver(host, port)
        except OSError as error:
            raise httpcore.ConnectError(f"could not resolve the provider's host ({type(error).__name__})") from None
        if not addresses:
            raise httpcore.ConnectError("the provider's host has no address")
        if not self.allow_private and any(internal(address) for address in addresses):
            raise RefusedAddress("the provider's host resolves to a private, loopback or link-local address")
        failure: Exception | None = None
        for address in addresses:  # as a resolver's answer is meant: the first that takes the connection
            try:
                return await self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                failure = error
        assert failure is not None
        raise failure

    async def connect_unix_socket(self, *args: object, **kwargs: object) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("the provider is reached over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class CheckedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport with its connection pool on a `CheckedBackend`."""

    def __init__(self, backend: CheckedBackend) -> None:
        tls = httpx.create_ssl_context()  # once: building one costs ~0.15 s
        super().__init__(verify=tls, trust_env=False)
        # httpx takes no network backend: the same pool it builds, given ours (its one attribute we touch;
        # tests/agent/test_egress.py fails if a new httpx stops using it).
        self._pool = httpcore.AsyncConnectionPool(ssl_context=tls, network_backend=backend)
