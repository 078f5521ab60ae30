"""Logging in and out, sessions, personal API tokens and login rate limits."""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk import state
from desk.access import require_admin
from desk.actors import SCOPES, Actor, Role, Scope, scopes_of
from desk.audit import service as audit
from desk.auth import events, passwords, throttle
from desk.auth import repository as repo
from desk.auth.models import TOKEN_DAYS, TokenCreated, TokenRead
from desk.config import get_settings
from desk.errors import Forbidden, NotFound, RateLimited, Unauthorized
from desk.schema import parse_object_id
from desk.users import access
from desk.users import repository as users_repo
from desk.users.models import email_key

LOCK_MINUTES = 15
TOUCH_EVERY = timedelta(seconds=60)  # a busy person's session is written once a minute, not on every request
TICKET_LIFETIME = timedelta(seconds=60)
TOKEN_PREFIX = "wod_"  # noqa: S105 - a marker, not a secret
WRONG_LOGIN = (
    "Wrong email or password. After a few failed attempts, each further try from this address has to wait "
    "a little longer."
)
DEACTIVATED = "This account is deactivated. Ask an admin of the desk to reactivate it."


@dataclass(frozen=True)
class LoggedIn:
    user: dict
    session_secret: str


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


# What the credential says beside the stored user, in the dict `user_for_session` and `user_for_token` answer
# (never stored): when a session logged in, what a token may do. `actor_for` puts them on the Actor.
LOGGED_IN_AT = "sessionLoggedInAt"
TOKEN_SCOPES = "tokenScopes"  # noqa: S105 - a key, not a secret


def actor_for(user: dict, *, by_token: bool = False) -> Actor:
    """The human Actor for a user as `user_for_session` or `user_for_token` found them (with the credential's
    login time or scopes); `by_token` when the request came with an API token."""
    scopes = user.get(TOKEN_SCOPES)
    return Actor(
        id=str(user["_id"]),
        role=Role(user["role"]),
        kind="human",
        by_token=by_token or scopes is not None,
        scopes=scopes,
        logged_in_at=user.get(LOGGED_IN_AT),
    )


async def login(*, db: AsyncDatabase, email: str, password: str, ip: str) -> LoggedIn:
    """Check the password and open a session; lockouts and unknown emails answer like a wrong password."""
    user = await _check_password(db=db, email=email, password=password, ip=ip)
    return LoggedIn(user=user, session_secret=await open_session(db=db, user_id=user["_id"]))


async def login_ticket(*, db: AsyncDatabase, email: str, password: str, ip: str, browser: str) -> str:
    """Check the password as `login` does; returns a one-time ticket that `redeem_login_ticket` turns into a session.

    A page's login runs over its websocket, which cannot set a cookie: the browser takes the ticket to
    an HTTP route, which answers with a new session cookie. The ticket is good once, for a minute, and
    only in the browser that logged in (NiceGUI's id for it), so a ticket seen elsewhere is worth nothing.
    """
    user = await _check_password(db=db, email=email, password=password, ip=ip)
    ticket = secrets.token_urlsafe(32)
    moment = state.current().clock.now()  # sessions and their tickets live on the Desk's clock
    await repo.insert_login_ticket(
        db, {"_id": digest(ticket), "userId": user["_id"], "browser": browser, "expiresAt": moment + TICKET_LIFETIME}
    )
    return ticket


async def redeem_login_ticket(*, db: AsyncDatabase, ticket: str, browser: str) -> str | None:
    """A new session for the ticket's person, its secret for the cookie; None when the ticket is spent or stale."""
    moment = state.current().clock.now()
    found = await repo.take_login_ticket(db, digest(ticket), browser=browser, moment=moment) if ticket else None
    if found is None:
        return None
    return await open_session(db=db, user_id=found["userId"])


async def _check_password(*, db: AsyncDatabase, email: str, password: str, ip: str) -> dict:
    """The active, unlocked user with this email and password; otherwise a refusal that helps no guesser.

    A wrong password or an unknown email get one generic answer (and count as a failure); only after
    the right password is a person told that their account is locked, and until when, or deactivated.
    """
    try:
        attempt = await throttle.admit(db=db, ip=ip, email=email)
    except RateLimited:
        events.record("login_failed", actor_id=None, subject_id=None, reason="throttled", address=ip)
        raise
    key, as_typed = email_key(email), email.strip().lower()
    user = await users_repo.get_by_email(db, key)
    if user is None and as_typed != key:  # an address stored before addresses were normalized
        user = await users_repo.get_by_email(db, as_typed)
    matches = await passwords.verify_password(user["passwordHash"] if user else None, password)
    moment = state.current().clock.now()  # what the lockout counts in, as the throttle does
    locked_until = user.get("lockedUntil") if user else None
    locked = locked_until is not None and locked_until > moment
    if user is None or not matches:
        subject = user["_id"] if user else None
        reason = "wrong_password" if user else "unknown_email"
        events.record("login_failed", actor_id=None, subject_id=subject, reason=reason, address=ip)
        if user is not None and user.get("active", False) and not locked:
            await _count_failure(db=db, user=user, moment=moment, ip=ip)
        raise Unauthorized(WRONG_LOGIN)
    await throttle.give_back(db=db, attempt=attempt)  # the right password: no guess to count
    if not user.get("active", False):
        events.record("login_failed", actor_id=None, subject_id=user["_id"], reason="deactivated", address=ip)
        raise Forbidden(DEACTIVATED)
    if locked:
        events.record("login_failed", actor_id=None, subject_id=user["_id"], reason="locked", address=ip)
        raise Forbidden(_locked_message(locked_until), details={"lockedUntil": locked_until})
    if user.get("failedLoginCount") or locked_until:
        await users_repo.clear_failed_logins(db, user["_id"])
    # shown to admins as "last login"; the login answers with the user as stored now, this login included
    user = await users_repo.record_login(db, user["_id"], at=moment) or user
    events.record("login_succeeded", actor_id=user["_id"], subject_id=user["_id"], address=ip)
    return user


async def _count_failure(*, db: AsyncDatabase, user: dict, moment: datetime, ip: str) -> None:
    """One more wrong password on the account; the one that locks it is told to admins (security log, audit log)."""
    await users_repo.record_failed_login(db, user["_id"])
    lock = await throttle.count_failure(db=db, user_id=user["_id"], ip=ip, moment=moment)
    until = moment + timedelta(minutes=LOCK_MINUTES)
    if lock is None or await users_repo.lock(db, user["_id"], until=until, moment=moment) is None:
        return
    facts = {"failures": lock.failures, "addresses": lock.addresses}
    events.record("account_locked", actor_id=None, subject_id=user["_id"], until=until, address=ip, **facts)
    details = {"name": user["name"], "until": until, **facts}
    await audit.record(db=db, actor=None, action="account_locked", subject_id=user["_id"], details=details)


def lock_ends(until: datetime) -> datetime:
    """When a lock ends as people are told it (the login page, the Users page): the next whole minute, since
    17:00:21 told as "17:00" would have a retry then refused; both read it here so they never differ."""
    whole = until.replace(second=0, microsecond=0)
    return whole if whole == until else whole + timedelta(minutes=1)


def _locked_message(until: datetime) -> str:
    return (
        f"This account was locked for {LOCK_MINUTES} minutes after many failed logins from many addresses, "
        f"until {lock_ends(until).astimezone(UTC):%H:%M} UTC. Try again then, or ask an admin to unlock it."
    )


async def limit_rate(*, db: AsyncDatabase, key: str, per_minute: int, message: str) -> datetime:
    """Count one hit on `key` in this minute (shared by every process); RateLimited past `per_minute`.

    `message` says what was too much; when to try again is added to it. Returns the window the hit went to,
    for `forgive_hit` when what was counted turned out no failure.
    """
    moment = state.current().clock.now()  # the Desk's, as the login throttle's: a test moves it to the next minute
    window_end = moment.replace(second=0, microsecond=0) + timedelta(minutes=1)
    if await repo.hit(db, key, window_end=window_end) > per_minute:
        retry_after = max(1, int((window_end - moment).total_seconds()))
        raise RateLimited(message, retry_after=retry_after)
    return window_end


async def forgive_hit(*, db: AsyncDatabase, key: str, window_end: datetime) -> None:
    """Take back a hit `limit_rate` counted (a password that was right is no try at guessing it)."""
    await repo.unhit(db, key, window_end=window_end)


async def open_session(*, db: AsyncDatabase, user_id: ObjectId) -> str:
    """A new session for the user; returns the secret for the cookie (only its hash is stored)."""
    settings = get_settings()
    secret = secrets.token_urlsafe(32)  # 256 bits
    moment = state.current().clock.now()
    await repo.insert_session(
        db,
        {
            "_id": digest(secret),
            "userId": user_id,
            "createdAt": moment,
            "lastSeenAt": moment,
            "idleExpiresAt": _idle_until(moment),
            "expiresAt": moment + timedelta(hours=settings.desk_session_max_hours),
        },
    )
    return secret


async def user_for_session(*, db: AsyncDatabase, secret: str, touch: bool = True) -> dict:
    """The active user behind a session cookie; Unauthorized when it is unknown, idle too long or too old.

    `touch` counts this as the person's activity, which keeps the session from going idle; a check
    that runs by itself (an open page's) passes False, or the idle limit would never come.
    """
    found = await repo.get_session_and_user(db, digest(secret)) if secret else None
    session, user = found or (None, None)
    moment = state.current().clock.now()  # a test moves it past the idle or the absolute limit
    if session is None or session["idleExpiresAt"] <= moment or session["expiresAt"] <= moment:
        raise Unauthorized("Your session has ended; please log in again.")
    if user is None or not user.get("active", False):
        raise Unauthorized("Your session has ended; please log in again.")
    if touch and moment - session["lastSeenAt"] >= TOUCH_EVERY:
        await repo.touch_session(db, session["_id"], seen_at=moment, idle_until=_idle_until(moment))
    return user | {LOGGED_IN_AT: session["createdAt"]}  # only a login opens a session: it began then


def _idle_until(seen: datetime) -> datetime:
    """When a session seen at `seen` goes idle. Activity is written once a minute (TOUCH_EVERY), so a
    request in that minute is not on record: the minute is added, and the idle limit is kept to within a
    minute over, never under (a person working 59 s after a write was logged out a minute early)."""
    return seen + timedelta(minutes=get_settings().desk_session_idle_minutes) + TOUCH_EVERY


async def logout(*, db: AsyncDatabase, secret: str) -> None:
    """End the session behind `secret` and what runs on the person's behalf (no error if it already ended)."""
    session = await repo.delete_session(db, digest(secret))
    if session is not None:
        events.record("logged_out", actor_id=session["userId"], subject_id=session["userId"])
        await access.access_lost(db=db, user_id=str(session["userId"]), reason="logged_out")


async def end_sessions(*, db: AsyncDatabase, user_id: ObjectId, keep_secret: str | None = None) -> None:
    """End every session of the user, except the one behind `keep_secret`."""
    await repo.delete_user_sessions(db, user_id, keep=digest(keep_secret) if keep_secret else None)


async def user_for_token(*, db: AsyncDatabase, secret: str) -> dict:
    """The active user behind an unexpired personal API token, with the token's scopes; records its last use."""
    found = await repo.get_token_and_user(db, digest(secret)) if secret.startswith(TOKEN_PREFIX) else None
    token, user = found or (None, None)
    if token is None or user is None or not user.get("active", False):
        raise Unauthorized("The API token is not valid.")
    moment = state.current().clock.now()  # tokens expire on the Desk's clock, as sessions do
    if token["expiresAt"] <= moment:  # tokens made before expiry got one at the desk's start (auth repository)
        raise Unauthorized(f"The API token expired on {token['expiresAt']:%Y-%m-%d}; make a new one on your profile.")
    if token.get("lastUsedAt") is None or moment - token["lastUsedAt"] >= TOUCH_EVERY:  # a write a minute at most
        await repo.touch_token(db, token["_id"], used_at=moment)
    # a role taken away takes its scopes with it: an admin made a user keeps no admin token
    return user | {TOKEN_SCOPES: frozenset(token["scopes"]) & scopes_of(Role(user["role"]))}


ADMIN_SCOPE_FOR_ADMINS = "Only admins can give a token the admin scope."


async def create_token(
    *,
    db: AsyncDatabase,
    actor: Actor,
    name: str,
    scopes: list[Scope] | None = None,
    expires_in_days: int = TOKEN_DAYS,
) -> TokenCreated:
    """A new personal API token with `scopes` (None: all the actor's role allows) for `expires_in_days`; the
    secret is in this answer and nowhere else."""
    allowed = scopes_of(actor.role) if actor.is_human and actor.role else frozenset()
    if scopes is not None and not set(scopes) <= allowed:
        raise Forbidden(ADMIN_SCOPE_FOR_ADMINS, details={"field": "scopes"})
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    moment = state.current().clock.now()
    doc = await repo.insert_token(
        db,
        {
            "userId": ObjectId(actor.id),
            "name": name,
            "hash": digest(secret),
            "prefix": secret[: len(TOKEN_PREFIX) + 6],
            "scopes": [scope for scope in SCOPES if scope in (allowed if scopes is None else scopes)],
            "createdAt": moment,
            "expiresAt": moment + timedelta(days=expires_in_days),
            "lastUsedAt": None,
        },
    )
    events.record("token_created", actor_id=actor.id, subject_id=actor.id, tokenId=doc["_id"], scopes=doc["scopes"])
    details = _named(doc) | {"scopes": doc["scopes"], "expiresAt": doc["expiresAt"]}
    await audit.record(db=db, actor=actor, action="token_created", subject_id=actor.id, details=details)
    return TokenCreated.model_validate({**doc, "secret": secret})


async def list_tokens(*, db: AsyncDatabase, actor: Actor) -> list[TokenRead]:
    """The actor's own tokens, newest first (never their secrets)."""
    return [TokenRead.model_validate(doc) for doc in await repo.list_tokens(db, ObjectId(actor.id))]


async def revoke_token(*, db: AsyncDatabase, actor: Actor, token_id: str, by_token: str | None = None) -> None:
    """Delete one of the actor's own tokens; someone else's is NotFound.

    `by_token`: the secret of the API token the request came with, which may revoke itself and no other
    (as it may not list or make them): a leaked token must not cut its owner's other scripts off.
    """
    oid, owner = parse_object_id(token_id), ObjectId(actor.id)
    used = digest(by_token) if by_token is not None else None
    gone = await repo.delete_token(db, oid, owner, token_hash=used) if oid else None
    if gone is None and used is not None and oid and await repo.has_token(db, oid, owner):
        raise Forbidden(NOT_ITSELF)
    if gone is None:
        raise NotFound("No such API token.")
    events.record("token_revoked", actor_id=actor.id, subject_id=actor.id, tokenId=oid)
    await audit.record(db=db, actor=actor, action="token_revoked", subject_id=actor.id, details=_named(gone))


async def revoke_all_tokens(*, db: AsyncDatabase, actor: Actor, user_id: ObjectId) -> None:
    """Delete every API token of the user (a password reset, a deactivation, or a change that asks for it)."""
    count = await repo.delete_user_tokens(db, user_id)
    if not count:  # nothing revoked is no event
        return
    events.record("tokens_revoked", actor_id=actor.id, subject_id=user_id, count=count)
    await audit.record(db=db, actor=actor, action="tokens_revoked", subject_id=user_id, details={"count": count})


async def list_tokens_of(*, db: AsyncDatabase, actor: Actor, user_id: str) -> list[TokenRead]:
    """Anyone's tokens with their last use, newest first, for admins (never their secrets)."""
    owner = await _token_owner(db=db, actor=actor, user_id=user_id)
    return [TokenRead.model_validate(doc) for doc in await repo.list_tokens(db, owner)]


async def revoke_token_of(*, db: AsyncDatabase, actor: Actor, user_id: str, token_id: str) -> None:
    """An admin deletes one of anyone's tokens; NotFound when that person has no such token."""
    owner = await _token_owner(db=db, actor=actor, user_id=user_id)
    oid = parse_object_id(token_id)
    gone = await repo.delete_token(db, oid, owner) if oid else None
    if gone is None:
        raise NotFound("No such API token.")
    events.record("token_revoked", actor_id=actor.id, subject_id=owner, tokenId=oid)
    await audit.record(db=db, actor=actor, action="token_revoked", subject_id=owner, details=_named(gone))


NOT_ITSELF = "An API token can revoke only itself. Revoke your other tokens on your profile page, in a browser."


def _named(token: dict) -> dict[str, str]:
    """A token as the audit log names it: its id, its name and the prefix its owner sees (never a secret)."""
    return {"tokenId": str(token["_id"]), "name": token.get("name", ""), "prefix": token.get("prefix", "")}


async def _token_owner(*, db: AsyncDatabase, actor: Actor, user_id: str) -> ObjectId:
    """The id of the person whose tokens an admin is looking at; Forbidden for others, NotFound for no one."""
    require_admin(actor, "manage other people's API tokens")
    oid = parse_object_id(user_id)
    if oid is None or await users_repo.get(db, oid) is None:
        raise NotFound("No such user.")
    return oid
