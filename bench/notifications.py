"""Notifications benchmark (issue 43): what telling many people costs, and how fast the worker mails.

Two figures, on the embedded database, in one process:
- round trips: the database commands one comment sends when it concerns 50 people (the requester and 49 who
  commented before), email on, every one of them owed a new email: the fan-out is a constant number of
  commands (tests/notifications/test_commands.py pins it), so it is also shown for 5;
- mails/s: M people each owed one email, sent by the desk's mail task in a worker at the concurrency
  `desk worker` runs it at (desk/tasks.py) to a local aiosmtpd in its own process (plain SMTP on loopback, and
  STARTTLS), from the first claim to the last email taken (target: at least 50 a second), and how many connections
  the worker opened for them (it keeps them between emails: desk/notifications/mail.py, `Relay`).
Run by hand, never in CI (the machine is shared: the load average is printed):
    .venv/bin/python -m bench.notifications [--mails 500]
"""

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bson import ObjectId
from pymongo import AsyncMongoClient

from bench.harness import free_port
from desk import state, tasks
from desk.actors import Actor, Role
from desk.app import ensure_indexes
from desk.config import Settings, use_settings
from desk.db.client import Database
from desk.db.embedded import EmbeddedMongo
from desk.jobs.table import Context
from desk.jobs.worker import Worker
from desk.notifications import mail_queue
from desk.users import service as users_service
from desk.users.models import UserCreate
from desk.work_orders import service as orders
from desk.work_orders.models import CommentCreate, WorkOrderCreate
from tests.commands import watched

TLS = Path(__file__).parent.parent / "tests" / "agent" / "tls"


async def person(db, role: str = "user") -> Actor:
    password = "bench-password-" + ObjectId().binary.hex()
    data = UserCreate(email=f"b{ObjectId()}@bench.local", name="Bench person", role=role, password=password)
    return Actor(id=(await users_service.register(db=db, data=data)).id, role=Role(role))


async def round_trips(uri: str, db, people: int) -> int:
    """Commands sent by one comment on an order that concerns `people`, each owed a new email."""
    asker = await person(db)
    order = await orders.create(db=db, actor=asker, data=WorkOrderCreate(title="Heating off", ownerId=None))
    for _ in range(people - 1):
        await orders.add_comment(db=db, actor=await person(db), order_id=order.id, data=CommentCreate(text="Me too"))
    await db["mail_windows"].delete_many({})
    stranger = await person(db, "admin")
    async with watched(uri, db.name) as (counted, commands):  # counted as tests/notifications/test_commands.py does
        await orders.add_comment(db=counted, actor=stranger, order_id=order.id, data=CommentCreate(text="Fixed"))
    return len(commands.sent)


async def mails_per_second(db, settings: Settings, mails: int) -> tuple[float, int]:
    """Owe `mails` emails (an admin gives each of `mails` people an order), then time the worker sending them all;
    the rate, and how many connections to the mail server it opened."""
    await db["outbox_events"].delete_many({})
    admin = await person(db, "admin")
    for _ in range(mails):
        given = WorkOrderCreate(title="Leaking tap", ownerId=(await person(db)).id)
        await orders.create(db=db, actor=admin, data=given)
    await db["outbox_events"].delete_many({"type": {"$ne": mail_queue.TASK}})  # the triage jobs: not timed
    at_once = tasks.worker(settings).concurrency  # as `desk worker` runs them
    worker = Worker(functions=mail_queue.tasks(), concurrency=at_once, poll_delay=0.05)
    started = time.perf_counter()
    await worker.run_due(Context(db=db, settings=settings))  # returns once every due job has ended
    elapsed = time.perf_counter() - started
    sent = await db["outbox_events"].count_documents({"type": mail_queue.TASK, "status": "done"})
    assert sent == mails, f"{sent} of {mails} mails sent"
    relay = state.current().mail_relay
    await relay.close_idle(everything=True)
    return mails / elapsed, relay.opened


@contextmanager
def smtp_server(port: int, *, tls: bool) -> Iterator[None]:
    """aiosmtpd in its own process (as a mail relay is), taking every email and keeping none."""
    options = ["--tlscert", str(TLS / "localhost.pem"), "--tlskey", str(TLS / "localhost.key")] if tls else []
    options = options or ["--no-requiretls"]
    command = [sys.executable, "-m", "aiosmtpd", "-n", "-c", "aiosmtpd.handlers.Sink", "-l", f"127.0.0.1:{port}"]
    server = subprocess.Popen([*command, *options], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # noqa: S603
    try:
        deadline = time.monotonic() + 30
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert time.monotonic() < deadline and server.poll() is None, "aiosmtpd did not start"
            time.sleep(0.05)
        yield
    finally:
        server.terminate()
        server.wait()


async def measure(uri: str, mails: int) -> None:
    db = Database(AsyncMongoClient(uri, tz_aware=True), "bench_notifications")
    await ensure_indexes(db)
    base = {"desk_mail_from": "desk@bench.local", "desk_public_url": "https://desk.bench.local"}
    use_settings(Settings(desk_smtp_url="smtp://127.0.0.1:1", desk_writes_per_minute=100_000, **base))
    for people in (5, 50):
        print(f"a comment concerning {people:>2} people: {await round_trips(uri, db, people)} database commands")
    os.environ["SSL_CERT_FILE"] = str(TLS / "localhost.pem")  # the tests' certificate, trusted here
    for tls in (False, True):
        port = free_port()
        url = f"smtp://localhost:{port}?starttls=true" if tls else f"smtp://127.0.0.1:{port}"
        settings = Settings(desk_smtp_url=url, desk_writes_per_minute=100_000, **base)
        use_settings(settings)
        with smtp_server(port, tls=tls):
            rate, connections = await mails_per_second(db, settings, mails)
        how = "STARTTLS" if tls else "plain SMTP"
        print(f"worker to a local aiosmtpd ({how}), {mails} mails: {rate:.0f} mails/s on {connections} connections")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mails", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="desk-notifications-bench-") as tmp, EmbeddedMongo(Path(tmp)) as uri:
        asyncio.run(measure(uri, args.mails))


if __name__ == "__main__":
    main()
