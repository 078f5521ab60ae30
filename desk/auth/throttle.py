"""Login throttling by address, beside the per-account lockout (desk/users/repository.py), as OWASP advises.

Three counters, each answering a different attacker:
- the account: 5 wrong passwords in a row lock it for 15 minutes, from whatever address (a guesser
  spread over many addresses); an admin can unlock it sooner;
- the address and the email typed: a failure budget per minute (DESK_LOGIN_ATTEMPTS_PER_MINUTE), so one
  person mistyping their email, or a script stuck on a wrong one, holds up nobody else behind the same NAT;
- the address alone: ADDRESS_FACTOR times that budget across every email, which stops one address
  trying password after password on email after email.

Only failures count: an attempt takes one from both address budgets before the password is checked
(so a burst of parallel guesses cannot all slip through) and gives it back when the password was right,
so an office of people logging in at nine is never throttled. Emails are kept as hashes: people type
passwords into the email field.
"""

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from pymongo.asynchronous.database import AsyncDatabase

from desk.auth import repository as repo
from desk.config import get_settings
from desk.errors import RateLimited
from desk.schema import now
from desk.users.models import email_key

ADDRESS_FACTOR = 5
TOO_MANY = "Too many login attempts from this address"


@dataclass(frozen=True)
class Attempt:
    """The counters one login attempt took from, to give back if its password was right."""

    keys: tuple[str, ...]
    window_end: datetime


async def admit(*, db: AsyncDatabase, ip: str, email: str) -> Attempt:
    """Take one attempt from the address's budgets; RateLimited when the email or the address has failed too often."""
    per_minute = get_settings().desk_login_attempts_per_minute
    moment = now()
    window_end = moment.replace(second=0, microsecond=0) + timedelta(minutes=1)
    typed = hashlib.sha256(email_key(email).encode()).hexdigest()[:32]
    limits = {f"login:{ip}:{typed}": per_minute, f"login:{ip}": per_minute * ADDRESS_FACTOR}
    taken: list[str] = []
    for key, limit in limits.items():
        taken.append(key)
        if await repo.hit(db, key, window_end=window_end) > limit:
            retry_after = max(1, int((window_end - moment).total_seconds()))
            raise RateLimited(TOO_MANY, retry_after=retry_after)
    return Attempt(keys=tuple(taken), window_end=window_end)


async def give_back(*, db: AsyncDatabase, attempt: Attempt) -> None:
    """The password was right: this attempt was no failure, so it counts against no budget."""
    for key in attempt.keys:
        await repo.unhit(db, key, window_end=attempt.window_end)
