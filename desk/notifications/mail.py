"""An email about one order: its text and HTML parts, its links, its unsubscribe headers; and sending it by SMTP.

Every piece of a person's text (titles, comments, names) is escaped in the HTML part, and headers are built by the
standard library's email package, which folds and encodes them: a title cannot add a header. Nothing secret goes
in: the notification's words, the order's link and the unsubscribe link, no more.
"""

import asyncio
import html
import smtplib
import ssl
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formataddr, make_msgid

from desk.config import SmtpTarget

TIMEOUT_SECONDS = 20.0


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
    """Hand the email to the mail server (in a thread: smtplib blocks); OSError and SMTPException when it cannot.

    `helo`: the name the desk greets the server with (its public host). Left to smtplib, it is `socket.getfqdn()`,
    a reverse DNS lookup before every email, which made each take over 100 ms where the lookup is slow.
    """
    await asyncio.to_thread(_send, target, message, helo)


def _send(target: SmtpTarget, message: EmailMessage, helo: str) -> None:
    # the system's trusted roots, read only when TLS is used: loading them costs more than a plain send
    context = ssl.create_default_context() if target.tls or target.starttls else None
    timeout = TIMEOUT_SECONDS
    if target.tls:
        client: smtplib.SMTP = smtplib.SMTP_SSL(
            target.host, target.port, local_hostname=helo, timeout=timeout, context=context
        )
    else:
        client = smtplib.SMTP(target.host, target.port, local_hostname=helo, timeout=timeout)
    with client:
        if target.starttls:
            client.starttls(context=context)
        if target.user is not None:
            client.login(target.user, target.password or "")
        client.send_message(message)
