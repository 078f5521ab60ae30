"""Schemathesis hooks for bench/fuzz.py (SCHEMATHESIS_HOOKS=bench.fuzz_auth), loaded by `st run`.

Every request carries the CSRF header, as the desk's own pages and any honest client do (without it a
state-changing request is a 403 before anything else is checked). With FUZZ_EMAIL set, requests go as
that person: a session cookie from a real login, logged in again whenever a request answers 401,
since the fuzzer itself logs out, and an admin may reset a password or end sessions along the way.
When the login itself fails (the fuzzing admin reset its own password, changed its own email, or locked
its account), the account is put back straight in the database (FUZZ_MONGODB_URI), as an operator would,
and the login tried again. It is found by the id its first login answered: its email may be what changed.
"""

import os

import requests
import schemathesis
from argon2 import PasswordHasher
from bson import ObjectId
from pymongo import MongoClient

URL = os.environ.get("FUZZ_URL", "")
EMAIL = os.environ.get("FUZZ_EMAIL", "")
PASSWORD = os.environ.get("FUZZ_PASSWORD", "")
CSRF = {"X-Desk-CSRF": "1"}
COOKIE = "desk_session"  # plain http: no __Host- prefix (desk/http.py)
MONGODB_URI = os.environ.get("FUZZ_MONGODB_URI", "")
UNLOCKED = {"failedLoginCount": 0, "lockedUntil": None}
_account: dict[str, object] = {}  # the fuzzing person's id, from its first login


@schemathesis.hook
def before_call(context, case, kwargs):
    case.headers = {**CSRF, **(case.headers or {})}


if EMAIL:
    # Kept for the whole run (None would log in before every request, an argon2 hash each time).
    @schemathesis.auth(refresh_interval=24 * 3600, retry_on=[401])
    class Session:
        """A logged-in browser session of FUZZ_EMAIL."""

        def get(self, case, context):
            answer = _login()
            if answer.status_code in (401, 403, 429) and MONGODB_URI:
                _restore()
                answer = _login()
            answer.raise_for_status()
            _account.setdefault("_id", answer.json()["id"])
            return answer.cookies[COOKIE]

        def set(self, case, data, context):
            case.cookies = {**(case.cookies or {}), COOKIE: data}


def _login() -> requests.Response:
    body = {"email": EMAIL, "password": PASSWORD}
    return requests.post(f"{URL}/api/v1/auth/login", json=body, headers=CSRF, timeout=30)


def _restore() -> None:
    """The account as bench/fuzz.py made it: its password, active, unlocked."""
    who = {"_id": ObjectId(str(_account["_id"]))} if _account else {"email": EMAIL}
    with MongoClient(MONGODB_URI) as client:
        client["desk"]["users"].update_one(
            who,
            {"$set": {"email": EMAIL, "passwordHash": PasswordHasher().hash(PASSWORD), "active": True, **UNLOCKED}},
        )
        client["desk"]["rate_limits"].delete_many({})  # the failed logins' counters: a fuzz desk, nobody else's
