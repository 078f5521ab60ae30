"""An email about one order: its text and HTML parts, its links, its unsubscribe headers; and sending it by SMTP.

Every piece of a person's text (titles, comments, names) is escaped in the HTML part, and headers are built by the
standard library's email package, which folds and encodes them: a title cannot add a header. Nothing secret goes
in: the notification's words, the order's link and the unsubscribe link, no more.
"""

import asyncio
import html
import smtplib
import ssl
import time
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formataddr, make_msgid

from desk import state
from desk.config import SmtpTarget

TIMEOUT_SECONDS = 20.0
# A connection unused this long is closed: a batch's mailings share one, a quiet desk holds none open at its relay
IDLE_SECONDS = 10.0


@dataclass(frozen=True)
class Letter:
    """What one email says: to whom, about which order, the events' texts (one: at once; more: a digest)."""

    to_name: str
    to_address: str
    title: str
    order_url: str
    unsubscribe_url: str
    texts: list[str]


def compose(letter: Letter, *, sender: str) -> EmailMessage:
    """The email, with a plain-text and an HTML part and the one-click unsubscribe headers (RFC 8058)."""
    message = EmailMessage()
    message["From"] = formataddr(("Work Order Desk", sender))
    message["To"] = formataddr((_one_line(letter.to_name), letter.to_address))
    message["Subject"] = _subject(letter)
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2])
    message["List-Unsubscribe"] = f"<{letter.unsubscribe_url}>"
    message["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    message["Auto-Submitted"] = "auto-generated"  # RFC 3834: out-of-office replies stay away
    message.set_content(_text(letter))
    message.add_alternative(_html(letter), subtype="html")
    return message


def _subject(letter: Letter) -> str:
    if len(letter.texts) == 1:
        return _one_line(letter.texts[0])[:150]
    return f"{len(letter.texts)} updates on “{_one_line(letter.title)[:120]}”"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _text(letter: Letter) -> str:
    lines = [f"Hello {letter.to_name},", ""]
    lines += ["What happened:", *[f"- {text}" for text in letter.texts]] if len(letter.texts) > 1 else letter.texts
    lines += ["", f"Open the work order: {letter.order_url}", "", f"Stop these emails: {letter.unsubscribe_url}", ""]
    return "\n".join(lines)


def _html(letter: Letter) -> str:
    esc = html.escape
    items = "".join(f"<li>{esc(text)}</li>" for text in letter.texts)
    return (
        "<!doctype html><html><body>"
        f"<p>Hello {esc(letter.to_name)},</p>"
        f"<ul>{items}</ul>"
        f'<p><a href="{esc(letter.order_url)}">Open “{esc(letter.title)}”</a></p>'
        f'<p style="font-size:small"><a href="{esc(letter.unsubscribe_url)}">Stop these emails</a></p>'
        "</body></html>"
    )


async def send(target: SmtpTarget, message: EmailMessage, *, helo: str) -> None:
    """Hand the email to the mail server, on a connection of this process's `Relay`; OSError and SMTPException
    when it cannot.

    `helo`: the name the desk greets the server with (its public host). Left to smtplib, it is `socket.getfqdn()`,
    a reverse DNS lookup before every email, which made each take over 100 ms where the lookup is slow.
    """
    desk = state.current()
    if desk.mail_relay is None:
        desk.mail_relay = Relay()
    await desk.mail_relay.send(target, message, helo=helo)


@dataclass
class _Kept:
    client: smtplib.SMTP
    target: SmtpTarget
    used: float  # monotonic


class Relay:
    """A process's connections to the mail server, each reused by one mailing after another.

    A connection's TCP and TLS handshakes and its login cost more than an email (the bench sent 34-59 a second with
    a connection each): a batch of mailings shares them. A mailing takes an idle connection (or opens one), sends
    on it in a thread (smtplib blocks) and gives it back, so there are at most as many as mailings at once. One
    the server dropped meanwhile (its idle timeout, a restart) is replaced at once and the email sent on the new
    one; a refusal of one email (a mailbox, a sender, its content) leaves the connection fit for the next; one
    unused for IDLE_SECONDS is closed (`close_idle`, on the worker's clock, and before any reuse).
    """

    def __init__(self) -> None:
        self._idle: list[_Kept] = []
        self.opened = 0  # connections opened, for the curious (a test, the bench)

    async def send(self, target: SmtpTarget, message: EmailMessage, *, helo: str) -> None:
        kept = self._take(target)
        used: list[smtplib.SMTP] = []  # the connection the email went out on, or failed on
        try:
            await asyncio.to_thread(self._send, kept, target, message, helo, used)
        except REFUSED:  # that email, not the connection: smtplib reset the session (unless the server said 421)
            self._give_back(used, target)
            raise
        except BaseException:  # the connection's state is unknown: closed (no QUIT, which could block the loop)
            _close(used)
            raise
        self._give_back(used, target)

    def _send(
        self, kept: smtplib.SMTP | None, target: SmtpTarget, message: EmailMessage, helo: str, used: list
    ) -> None:
        if kept is not None:
            used.append(kept)
            try:
                kept.send_message(message)
                return
            except (smtplib.SMTPServerDisconnected, ConnectionError):  # dropped while idle: once more, afresh
                pass
            except smtplib.SMTPResponseException as error:
                if error.smtp_code != 421:  # 421: the server is closing the connection (its timeout, a restart)
                    raise
            _close(used)
            used.clear()
        client = _connect(target, helo)
        self.opened += 1
        used.append(client)
        client.send_message(message)

    def _take(self, target: SmtpTarget) -> smtplib.SMTP | None:
        stale = [kept for kept in self._idle if kept.target != target or _idle_for(kept) > IDLE_SECONDS]
        self._idle = [kept for kept in self._idle if kept not in stale]
        for kept in stale:  # closed without a QUIT: a socket's close does not block the loop
            kept.client.close()
        return self._idle.pop().client if self._idle else None

    def _give_back(self, used: list[smtplib.SMTP], target: SmtpTarget) -> None:
        if used and used[0].sock is not None:  # closed: the server said 421, and goes
            self._idle.append(_Kept(used[0], target, time.monotonic()))

    async def close_idle(self, *, everything: bool = False) -> int:
        """Say QUIT on the connections unused for IDLE_SECONDS (all of them: `everything`); how many."""
        done = [kept for kept in self._idle if everything or _idle_for(kept) > IDLE_SECONDS]
        self._idle = [kept for kept in self._idle if kept not in done]
        await asyncio.to_thread(_close, [kept.client for kept in done], polite=True)
        return len(done)


# Refusals of one email that leave the session usable: smtplib answers each with RSET before raising.
REFUSED = (smtplib.SMTPRecipientsRefused, smtplib.SMTPSenderRefused, smtplib.SMTPDataError)


def _idle_for(kept: _Kept) -> float:
    return time.monotonic() - kept.used


def _connect(target: SmtpTarget, helo: str) -> smtplib.SMTP:
    """A connection, greeted, encrypted and logged in as DESK_SMTP_URL says."""
    # the system's trusted roots, read only when TLS is used: loading them costs more than a plain send
    context = ssl.create_default_context() if target.tls or target.starttls else None
    timeout = TIMEOUT_SECONDS
    if target.tls:
        client: smtplib.SMTP = smtplib.SMTP_SSL(
            target.host, target.port, local_hostname=helo, timeout=timeout, context=context
        )
    else:
        client = smtplib.SMTP(target.host, target.port, local_hostname=helo, timeout=timeout)
    try:
        if target.starttls:
            client.starttls(context=context)
        if target.user is not None:
            client.login(target.user, target.password or "")
    except BaseException:
        client.close()
        raise
    return client


def _close(clients: list[smtplib.SMTP], *, polite: bool = False) -> None:
    for client in clients:
        try:
            if polite and client.sock is not None:
                client.quit()
        except (OSError, smtplib.SMTPException):  # gone already: nothing to say goodbye to
            pass
        finally:
            client.close()
