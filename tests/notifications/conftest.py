"""The real SMTP server the notification tests send to: aiosmtpd on loopback, STARTTLS with the tests' certificate and
a login; and the worker's mail task, run as the worker would."""

import email
import socket
import ssl
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from email.message import EmailMessage
from email.policy import default
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

from desk import state
from desk.jobs.table import Context
from desk.jobs.worker import Worker
from desk.notifications import mail_queue
from tests.helpers import reconfigure

TLS = Path(__file__).parent.parent / "agent" / "tls"
SMTP_USER, SMTP_PASSWORD = "desk", "relay-password-never-mailed"
REFUSED = "nobody@example.com"  # the server refuses this mailbox for good (550)


class Inbox:
    """What the mail server received, as parsed emails; and the server itself, stopped and started by a test."""

    def __init__(self) -> None:
        self.mails: list[EmailMessage] = []
        self.arrived = threading.Condition()
        self.port = _free_port()
        self.controller: Controller | None = None
        self.connections = 0  # connections the server took (each says STARTTLS once: it is required)
        self.logins = 0

    def handle_STARTTLS(self, server, session, envelope) -> bool:
        self.connections += 1
        return True

    async def handle_RCPT(self, server, session, envelope, address, options):
        if address == REFUSED:
            return "550 5.1.1 No such mailbox"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        with self.arrived:
            self.mails.append(email.message_from_bytes(envelope.content, policy=default))
        return "250 Message accepted"

    def start(self) -> None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(TLS / "localhost.pem", TLS / "localhost.key")
        self.controller = Controller(
            self,
            hostname="127.0.0.1",
            port=self.port,
            server_hostname="localhost",
            tls_context=context,
            require_starttls=True,  # nothing, not even the login, before STARTTLS
            authenticator=self._password,
            auth_required=True,
        )
        self.controller.start()

    def _password(self, server, session, envelope, mechanism, auth_data) -> AuthResult:
        self.logins += 1
        ok = auth_data.login == SMTP_USER.encode() and auth_data.password == SMTP_PASSWORD.encode()
        return AuthResult(success=ok)

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def smtp_server() -> Iterator[Inbox]:
    inbox = Inbox()
    inbox.start()
    yield inbox
    inbox.stop()


@pytest.fixture
async def inbox(smtp_server: Inbox, settings, clock, monkeypatch) -> AsyncIterator[Inbox]:
    """The module's mail server, emptied, and the desk pointed at it (trusting the tests' certificate); the
    connections the desk kept to it are closed at the end."""
    monkeypatch.setenv("SSL_CERT_FILE", str(TLS / "localhost.pem"))
    if smtp_server.controller is None:
        smtp_server.start()
    smtp_server.mails.clear()
    smtp_server.connections = smtp_server.logins = 0
    reconfigure(
        settings,
        desk_smtp_url=f"smtp://{SMTP_USER}:{SMTP_PASSWORD}@localhost:{smtp_server.port}?starttls=true",
        desk_mail_from="desk@example.com",
        desk_public_url="https://desk.example.com",
        desk_mail_batch_seconds=300,
    )
    yield smtp_server
    if (relay := state.current().mail_relay) is not None:
        await relay.close_idle(everything=True)


@pytest.fixture
def run_mail(db, clock) -> Callable[[], Awaitable[int]]:
    """Run every due mail job once, as the worker would (one at a time), at the test's clock."""

    async def run() -> int:
        worker = Worker(functions=mail_queue.tasks(), burst=True, clock=clock, poll_delay=0)
        return await worker.run_due(Context(db=db, settings=state.current().settings))

    return run
