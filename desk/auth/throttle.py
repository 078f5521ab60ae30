"""Login throttling that a stranger cannot turn against the account's owner (OWASP's guidance).

Four rules, each answering a different attacker:
- the address and the email typed: after DESK_LOGIN_FREE_FAILURES failures (3), each further try must
  wait 1, 2, 4, ... s (up to MAX_DELAY) after the last failure. It slows a guesser down to nothing, and
  it is theirs alone: the owner logging in from another address is never kept waiting by it;
- the address and the email typed, per minute (DESK_LOGIN_ATTEMPTS_PER_MINUTE), so one person mistyping
  their email, or a script stuck on a wrong one, holds up nobody else behind the same NAT;
- the address alone: ADDRESS_FACTOR times that budget across every email, which stops one address
  trying password after password on email after email;
- the account: it is locked outright (for LOCK_MINUTES, desk/auth/service.py) only when LOCK_FAILURES wrong
  passwords came from LOCK_ADDRESSES or more addresses within LOCK_WINDOW: a guesser spread over many
  addresses, whom the per-address rules cannot see. Admins are told (security log and audit log).

Only failures count: an attempt takes one from both address budgets and claims its place in the delay
before the password is checked (so a burst of parallel guesses cannot all slip through), and gives them
back when the password was right, so an office of people logging in at nine is never throttled. Emails
and addresses are kept as hashes: people type passwords into the email field.
"""

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from math import ceil

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk import state
from desk.auth import repository as repo
from desk.config import get_settings
from desk.errors import RateLimited
from desk.users.models import email_key

ADDRESS_FACTOR = 5
MAX_DELAY = timedelta(minutes=15)
DELAY_MEMORY = timedelta(hours=1)  # an address's failures for an email are forgotten an hour after the last
LOCK_FAILURES = 50
LOCK_ADDRESSES = 5
LOCK_WINDOW = timedelta(hours=1)
TOO_MANY = "Too many login attempts from this address"
TOO_MANY_FOR_EMAIL = "Too many failed logins with this email from this address"


@dataclass(frozen=True)
class Attempt:
    """What one login attempt took, to give back if its password was right."""

    keys: tuple[str, ...]
    window_end: datetime
    delay_key: str


@dataclass(frozen=True)
class Lock:
    """Why an account was just locked: this many failures from this many addresses within LOCK_WINDOW."""

    failures: int
    addresses: int


async def admit(*, db: AsyncDatabase, ip: str, email: str) -> Attempt:
    """Take one attempt from the address's budgets and delay; RateLimited when the email or address failed too often."""
    per_minute = get_settings().desk_login_attempts_per_minute
    moment = state.current().clock.now()  # the Desk's: a test moves it past a minute or a delay
    window_end = moment.replace(second=0, microsecond=0) + timedelta(minutes=1)
    typed = _hashed(email_key(email))
    limits = {f"login:{ip}:{typed}": per_minute, f"login:{ip}": per_minute * ADDRESS_FACTOR}
    taken: list[str] = []
    for key, limit in limits.items():
        taken.append(key)
        if await repo.hit(db, key, window_end=window_end) > limit:
            retry_after = max(1, int((window_end - moment).total_seconds()))
            raise RateLimited(TOO_MANY, retry_after=retry_after)
    delay_key = f"login-delay:{ip}:{typed}"
    await _take_turn(db, delay_key, moment)
    return Attempt(keys=tuple(taken), window_end=window_end, delay_key=delay_key)


async def _take_turn(db: AsyncDatabase, key: str, moment: datetime) -> None:
    """Claim the next try for (address, email), counted as a failure until the password proves otherwise.

    A compare-and-set on the count: of two tries sent together, one gets the turn, the other is told to wait.
    """
    state = await repo.get_limit(db, key)
    seen = state["v"] if state else 0  # the failures so far: each try is one until its password proves right
    if state is not None and state["until"] > moment:
        raise RateLimited(TOO_MANY_FOR_EMAIL, retry_after=max(1, ceil((state["until"] - moment).total_seconds())))
    turn = {"until": moment + delay_after(seen + 1), "expiresAt": moment + DELAY_MEMORY}
    if not await repo.swap(db, key, seen=seen, state=turn):
        raise RateLimited(TOO_MANY_FOR_EMAIL, retry_after=1)


def delay_after(failures: int) -> timedelta:
    """How long the next try waits after this many failures in a row: nothing, then 1, 2, 4, ... s, up to MAX_DELAY."""
    free = get_settings().desk_login_free_failures
    if failures < free:
        return timedelta()
    return min(timedelta(seconds=2 ** min(failures - free, 20)), MAX_DELAY)


async def give_back(*, db: AsyncDatabase, attempt: Attempt) -> None:
    """The password was right: this attempt was no failure, so it counts against no budget, and no delay is left."""
    for key in attempt.keys:
        await repo.unhit(db, key, window_end=attempt.window_end)
    await repo.forget(db, attempt.delay_key)


async def count_failure(*, db: AsyncDatabase, user_id: ObjectId, ip: str, moment: datetime) -> Lock | None:
    """Note a wrong password for the account; a Lock when the failures now call for locking it.

    The account keeps its newest LOCK_FAILURES failures; once they all fall within LOCK_WINDOW and came from
    LOCK_ADDRESSES addresses or more, it is locked, and counting starts again.
    """
    key = f"login-failures:{user_id}"
    entry = {"at": moment, "address": _hashed(ip)}
    failures = await repo.add_failure(db, key, entry=entry, keep=LOCK_FAILURES, expires_at=moment + LOCK_WINDOW)
    recent = [failure for failure in failures if failure["at"] > moment - LOCK_WINDOW]
    addresses = len({failure["address"] for failure in recent})
    if len(recent) < LOCK_FAILURES or addresses < LOCK_ADDRESSES:
        return None
    await repo.forget(db, key)
    return Lock(failures=len(recent), addresses=addresses)


def _hashed(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]
