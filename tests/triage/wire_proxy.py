"""A proxy in front of MongoDB that reads the commands going through it and can act on one (fault tests).

A worker process pointed at the proxy instead of the database is watched from outside, with no
hook in the desk: a `Trap` names a command (`findAndModify` on `outbox_events`, `insert` on
`triage_suggestions`, ...) and, when the database's reply to it comes back, runs an action (say,
SIGKILL the worker) and drops the reply, so the write is in the database and the worker never
learns it. It listens on a Unix socket of its own, as the embedded database does (no TCP port), and
forwards to the database's address: its Unix socket, or a MongoDB's host and port.

It reads the wire protocol's OP_MSG frames (the only opcode pymongo sends commands with after the
handshake) and passes every byte on unchanged.
"""

import asyncio
import contextlib
import shutil
import struct
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import bson
from pymongo.uri_parser import parse_uri

from desk.db.embedded.launcher import SOCKET_NAME, socket_uri

OP_MSG = 2013
HEADER = struct.Struct("<iiii")  # messageLength, requestID, responseTo, opCode


@dataclass
class Trap:
    """Fires once, on the reply to the first `command` on `collection` whose request and reply pass the checks."""

    command: str
    collection: str
    action: Callable[[], None]
    request: Callable[[dict[str, Any]], bool] = lambda _: True
    reply: Callable[[dict[str, Any]], bool] = lambda _: True
    fired: threading.Event = field(default_factory=threading.Event)

    def wants(self, body: dict[str, Any]) -> bool:
        return not self.fired.is_set() and body.get(self.command) == self.collection and self.request(body)


class WireProxy:
    """Listens on a Unix socket in a private directory and forwards every connection to the database at `uri`."""

    def __init__(self, uri: str) -> None:
        ((host, port),) = parse_uri(uri)["nodelist"]  # a socket's path comes with no port
        self._upstream = host, port
        self.traps: list[Trap] = []
        self.socket_path = Path()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wire-proxy", daemon=True)

    @property
    def uri(self) -> str:
        return socket_uri(self.socket_path)

    def through(self, uri: str) -> str:
        """`uri` (its credentials, database and options) with the proxy in place of its host."""
        scheme, _, rest = uri.partition("://")
        netloc, _, tail = rest.partition("/")
        credentials, at, _ = netloc.rpartition("@")
        return f"{scheme}://{credentials}{at}{quote(str(self.socket_path), safe='')}/{tail}"

    def __enter__(self) -> "WireProxy":
        # mkdtemp (0700), not the test's directory: a socket's path must fit in 107 bytes
        self.socket_path = Path(tempfile.mkdtemp(prefix="wire-proxy-")) / SOCKET_NAME
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the wire proxy did not start")
        return self

    def __exit__(self, *exc_info: object) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()
        shutil.rmtree(self.socket_path.parent, ignore_errors=True)

    async def _close(self) -> None:
        """Every connection closed and every task ended, so none is left pending when the loop goes."""
        if self._server is not None:
            self._server.close()
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def trap(self, command: str, collection: str, action: Callable[[], None], **checks: Any) -> Trap:
        trap = Trap(command, collection, action, **checks)
        self.traps.append(trap)
        return trap

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_unix_server(self._serve, path=self.socket_path))
        self._ready.set()
        self._loop.run_forever()

    async def _serve(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        try:
            server_in, server_out = await _connect(*self._upstream)
        except OSError:  # the database is down (restarting): the client sees a closed connection and retries
            client_out.close()
            return
        pending: dict[int, Trap] = {}
        up = asyncio.create_task(self._pipe(client_in, server_out, requests=pending))
        down = asyncio.create_task(self._pipe(server_in, client_out, replies=pending))
        try:
            await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (up, down):
                task.cancel()
            for writer in (client_out, server_out):
                writer.close()

    async def _pipe(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        *,
        requests: dict[int, Trap] | None = None,
        replies: dict[int, Trap] | None = None,
    ) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                header = await source.readexactly(HEADER.size)
                length, request_id, response_to, opcode = HEADER.unpack(header)
                rest = await source.readexactly(length - HEADER.size)
                if opcode == OP_MSG and requests is not None and (body := _body(rest)) is not None:
                    for trap in self.traps:
                        if trap.wants(body):
                            requests[request_id] = trap
                            break
                if opcode == OP_MSG and replies is not None and (trap := replies.pop(response_to, None)):
                    reply = _body(rest) or {}
                    if not trap.fired.is_set() and trap.reply(reply):
                        trap.fired.set()
                        trap.action()
                        return  # the reply is dropped: the client never learns its command was done
                sink.write(header + rest)
                await sink.drain()


async def _connect(host: str, port: int | None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if port is None:  # the embedded database: `host` is its Unix socket's path
        return await asyncio.open_unix_connection(host)
    return await asyncio.open_connection(host, port)


def _body(rest: bytes) -> dict[str, Any] | None:
    """The command document (section kind 0) of an OP_MSG, after its flag bits; None if it has none first."""
    if len(rest) < 5 or rest[4] != 0:
        return None
    (size,) = struct.unpack_from("<i", rest, 5)
    return bson.decode(rest[5 : 5 + size])
