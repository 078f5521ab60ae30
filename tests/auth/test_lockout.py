"""A lockout a stranger cannot use against you: growing delays per (email, address), an outright lock only for
a guesser spread over many addresses, and admins told when that happens."""

import asyncio
import json
import logging
from datetime import timedelta

import pytest
from bson import ObjectId

from desk.auth import service as auth_service
from desk.auth import throttle
from desk.config import get_settings
from desk.errors import Forbidden, RateLimited, Unauthorized
from desk.logs import JsonFormatter
from tests.clock import ManualClock
from tests.helpers import PASSWORD, lock_out

GUESSER, OWNER = "203.0.113.7", "198.51.100.20"
WRONG = "a wrong password"
WAIT = "Too many failed logins with this email from this address; try again in {} second{}."


async def guess(db, email: str, *, ip: str = GUESSER, password: str = WRONG):
    """One login through the service from `ip`: the exception it raised, or None when it logged in."""
    try:
        await auth_service.login(db=db, email=email, password=password, ip=ip)
    except (Unauthorized, Forbidden, RateLimited) as refused:
        return refused
    return None


async def wait_out(db, clock: ManualClock, ip: str = GUESSER) -> None:
    """Let the delay asked of `ip` pass, and no more: the Desk's clock moves to its end (no test sleeps through it)."""
    delays = await db["rate_limits"].find({"_id": {"$regex": f"^login-delay:{ip}:"}}).to_list()
    clock.move(max([delay["until"] - clock.now() for delay in delays], default=timedelta()))


async def test_after_three_failures_each_try_waits_twice_as_long_as_the_last(make_user, anonymous, db, clock):
    await make_user("user", email="sam@example.com")
    body = {"email": "sam@example.com", "password": "a wrong password"}

    free = [(await anonymous.post("/api/v1/auth/login", json=body)).status_code for _ in range(3)]
    waits = []
    for _ in range(5):
        held = await anonymous.post("/api/v1/auth/login", json=body)
        assert held.status_code == 429 and held.json()["error"]["code"] == "RATE_LIMITED"
        waits.append(int(held.headers["Retry-After"]))
        assert held.json()["error"]["message"] == WAIT.format(waits[-1], "" if waits[-1] == 1 else "s")
        clock.move(timedelta(seconds=waits[-1]) - timedelta(milliseconds=1))
        assert (await anonymous.post("/api/v1/auth/login", json=body)).status_code == 429  # not a moment early
        clock.move(timedelta(milliseconds=1))
        assert (await anonymous.post("/api/v1/auth/login", json=body)).status_code == 401  # the wait was kept

    assert free == [401, 401, 401]
    assert waits == [1, 2, 4, 8, 16]
    await db["rate_limits"].update_many({"_id": {"$regex": "^login-delay:"}}, {"$set": {"v": 40}})  # 40 failures
    clock.move(timedelta(seconds=32))
    await anonymous.post("/api/v1/auth/login", json=body)
    capped = await anonymous.post("/api/v1/auth/login", json=body)
    assert int(capped.headers["Retry-After"]) == throttle.MAX_DELAY.total_seconds()  # 15 minutes at most


async def test_a_guesser_elsewhere_never_keeps_the_owner_out(make_user, db, clock):
    sam = await make_user("user", email="sam@example.com")
    for _ in range(12):  # far into the delays: 1, 2, 4, ... 256 s
        await wait_out(db, clock)
        assert isinstance(await guess(db, "sam@example.com"), Unauthorized)
    assert isinstance(await guess(db, "sam@example.com"), RateLimited)  # the guesser waits

    typo = await guess(db, "sam@example.com", ip=OWNER, password="correct horse battery stapel")
    owner = await guess(db, "sam@example.com", ip=OWNER, password=PASSWORD)

    assert isinstance(typo, Unauthorized)  # the owner's own mistake is a plain wrong password, not a wait
    assert owner is None  # and the right password lets them in
    stored = await db["users"].find_one({"_id": ObjectId(sam["id"])})
    assert stored["lockedUntil"] is None
    assert isinstance(await guess(db, "sam@example.com"), RateLimited)  # the guesser still waits


async def test_the_right_password_from_the_delayed_address_clears_its_delay(make_user, db, clock):
    await make_user("user", email="sam@example.com")
    for _ in range(4):
        await guess(db, "sam@example.com", ip=OWNER, password="I forgot it")
    await wait_out(db, clock, OWNER)

    assert await guess(db, "sam@example.com", ip=OWNER, password=PASSWORD) is None
    again = [type(await guess(db, "sam@example.com", ip=OWNER, password="typo")) for _ in range(4)]
    assert again == [Unauthorized] * 3 + [RateLimited]  # three free tries again, as for anyone


async def test_an_unknown_email_is_delayed_exactly_as_a_known_one(make_user, anonymous):
    await make_user("user", email="sam@example.com")

    async def answers(email: str) -> list[tuple[int, str]]:
        body = {"email": email, "password": "a wrong password"}
        replies = [await anonymous.post("/api/v1/auth/login", json=body) for _ in range(5)]
        return [(r.status_code, r.json()["error"]["message"]) for r in replies]

    assert await answers("sam@example.com") == await answers("nobody@example.com")


async def test_guesses_sent_together_get_no_more_than_the_free_tries(make_user, db):
    await make_user("user", email="sam@example.com")

    answers = await asyncio.gather(*(guess(db, "sam@example.com") for _ in range(12)))

    assert sum(isinstance(answer, Unauthorized) for answer in answers) <= get_settings().desk_login_free_failures
    assert all(isinstance(answer, Unauthorized | RateLimited) for answer in answers)


async def test_many_failures_from_many_addresses_lock_the_account_and_admins_are_told(
    make_user, client_for, db, caplog, clock
):
    caplog.set_level(logging.INFO)
    admin, sam = await make_user("admin"), await make_user("user", email="sam@example.com", name="Sam Rivera")
    for n in range(throttle.LOCK_FAILURES - 1):
        await guess(db, "sam@example.com", ip=f"10.9.{n}.1")
    assert await guess(db, "sam@example.com", ip=OWNER, password=PASSWORD) is None  # 49: not yet

    await guess(db, "sam@example.com", ip="10.9.200.1")  # the fiftieth, from yet another address
    refused = await guess(db, "sam@example.com", ip=OWNER, password=PASSWORD)

    assert isinstance(refused, Forbidden) and "locked for 15 minutes" in refused.message
    until = (await db["users"].find_one({"_id": ObjectId(sam["id"])}))["lockedUntil"]
    assert until == clock.now() + timedelta(minutes=15)
    lines = [json.loads(JsonFormatter().format(r)) for r in caplog.records if r.name == "desk.security"]
    locked = [line for line in lines if line["event"] == "account_locked"]
    assert len(locked) == 1 and locked[0]["subjectId"] == sam["id"] and locked[0]["level"] == "warning"
    assert (locked[0]["failures"], locked[0]["addresses"]) == (50, 50)
    audit = (await (await client_for(admin)).get("/api/v1/admin/audit", params={"action": "account_locked"})).json()
    [entry] = audit["items"]
    assert entry["actorId"] is None and entry["subjectId"] == sam["id"]  # the desk did it, not a person
    assert entry["details"]["name"] == "Sam Rivera" and entry["details"]["failures"] == 50


async def test_many_failures_from_a_few_addresses_lock_nothing(make_user, db, clock):
    sam = await make_user("user", email="sam@example.com")
    for n in range(throttle.LOCK_FAILURES + 10):  # from four addresses, each waiting out its delays
        await wait_out(db, clock, f"10.8.{n % 4}.1")
        assert isinstance(await guess(db, "sam@example.com", ip=f"10.8.{n % 4}.1"), Unauthorized)

    assert (await db["users"].find_one({"_id": ObjectId(sam["id"])}))["lockedUntil"] is None
    assert await guess(db, "sam@example.com", ip=OWNER, password=PASSWORD) is None


async def test_failures_older_than_an_hour_count_for_nothing(make_user, db, clock):
    sam = await make_user("user", email="sam@example.com")
    for n in range(throttle.LOCK_FAILURES - 1):
        await guess(db, "sam@example.com", ip=f"10.7.{n}.1")
    clock.move(throttle.LOCK_WINDOW)

    await guess(db, "sam@example.com", ip="10.7.250.1")

    assert (await db["users"].find_one({"_id": ObjectId(sam["id"])}))["lockedUntil"] is None
    assert await guess(db, "sam@example.com", ip=OWNER, password=PASSWORD) is None


async def test_after_a_lock_the_count_starts_again(make_user, client_for, db):
    admin, sam = await make_user("admin"), await make_user("user", email="sam@example.com")
    await lock_out(db, "sam@example.com")
    await (await client_for(admin)).post(f"/api/v1/admin/users/{sam['id']}/unlock")

    assert isinstance(await guess(db, "sam@example.com", ip="10.6.0.1"), Unauthorized)

    assert (await db["users"].find_one({"_id": ObjectId(sam["id"])}))["lockedUntil"] is None
    assert await guess(db, "sam@example.com", ip=OWNER, password=PASSWORD) is None


@pytest.mark.parametrize(("failures", "wait"), [(1, 0), (2, 0), (3, 1), (4, 2), (12, 512), (13, 900), (400, 900)])
def test_the_delay_after_failures(failures: int, wait: int):
    assert throttle.delay_after(failures) == timedelta(seconds=wait)
