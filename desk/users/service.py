"""Managing people: admins run users; everyone manages their own profile."""

from datetime import timedelta
from functools import partial

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from desk import state
from desk.access import require_admin
from desk.actors import Actor
from desk.audit import service as audit
from desk.auth import events, passwords
from desk.auth import service as auth_service
from desk.errors import Conflict, Forbidden, NotFound, NothingToChange, RecentLoginRequired, ValidationFailed
from desk.schema import OffsetPage, PageQuery, by_id, now, parse_object_id
from desk.users import access
from desk.users import repository as repo
from desk.users.models import PersonRead, UserAdminUpdate, UserCreate, UserQuery, UserRead

PASSWORD_CHECKS_PER_MINUTE = 5
RECENT_LOGIN = timedelta(minutes=15)


def _require_session_to_reset(actor: Actor, changes: dict[str, object]) -> None:
    """A password is set from a browser session only: a leaked admin token that could reset its owner's
    password (or anyone's) would outlive its own revocation, holding the account itself. Adding people who are
    not admins, lowering roles and deactivating, a provisioning script with an admin token may do too."""
    if actor.by_token and "password" in changes:
        raise Forbidden("An API token cannot reset a password: that needs the desk in a browser.")


def _require_recent_login(actor: Actor, what: str) -> None:
    """What makes or widens a way into an account (an admin made, a role raised, an email changed) needs a browser
    session that logged in within RECENT_LOGIN: not a leaked token, whose admins would outlive its revocation, nor
    a session left open on an unattended screen."""
    minutes = int(RECENT_LOGIN.total_seconds() // 60)
    if actor.by_token:
        raise Forbidden(f"An API token cannot {what}: that needs the desk in a browser, logged in recently.")
    if actor.logged_in_at is None or state.current().clock.now() - actor.logged_in_at > RECENT_LOGIN:
        raise RecentLoginRequired(f"Log in again to {what}: it needs a login within the last {minutes} minutes.")


def _require_human(actor: Actor) -> None:
    if not actor.is_human:
        raise Forbidden()


async def create_user(*, db: AsyncDatabase, actor: Actor, data: UserCreate) -> UserRead:
    """Admins add a person with a role and a first password; an admin, from a recent login only."""
    require_admin(actor, "manage users")
    if data.role == "admin":
        _require_recent_login(actor, "add an admin")
    return await register(db=db, data=data, actor=actor)


async def register(
    *, db: AsyncDatabase, data: UserCreate, actor: Actor | None = None, via: str | None = None
) -> UserRead:
    """Store a new user after the password policy; used by admins, the first-admin set-up and the seed (no actor).

    The audit log keeps who was added by an admin (`actor`) or through a door named by `via` (the
    console's `desk create-admin`); the desk's own first admin and its demo people are not entries.
    """
    passwords.check_policy(data.password)
    moment = now()
    doc = {
        "email": data.email,
        "name": data.name,
        "role": data.role,
        "passwordHash": await passwords.hash_password(data.password),
        "aiEnabled": True,
        "active": True,
        "failedLoginCount": 0,
        "lockedUntil": None,
        "createdAt": moment,
        "updatedAt": moment,
    }
    try:
        made = UserRead.model_validate(await repo.insert(db, doc))
    except DuplicateKeyError:
        raise Conflict("A user with that email already exists.", details={"field": "email"}) from None
    events.record("user_created", actor_id=actor.id if actor else None, subject_id=made.id, role=made.role)
    if actor is not None or via is not None:
        details = {"name": made.name, "email": made.email, "role": made.role} | ({"via": via} if via else {})
        await audit.record(db=db, actor=actor, action="user_created", subject_id=made.id, details=details)
    return made


async def list_users(*, db: AsyncDatabase, actor: Actor, page: PageQuery | UserQuery) -> OffsetPage[UserRead]:
    """People sorted by name, those whose name or email contains `q` when given (admins only)."""
    require_admin(actor, "manage users")
    q = page.q if isinstance(page, UserQuery) else None
    docs, total = await repo.page_by_name(db, repo.containing(q), offset=page.offset, limit=page.limit)
    items = [UserRead.model_validate(doc) for doc in docs]
    return OffsetPage[UserRead](items=items, total=total, offset=page.offset, limit=page.limit)


async def get_user(*, db: AsyncDatabase, actor: Actor, user_id: str) -> UserRead | None:
    """A user by id, for admins and for the person themselves."""
    _require_human(actor)
    if not actor.is_admin and actor.id != user_id:
        raise Forbidden()
    doc = await by_id(user_id, partial(repo.get, db))
    return UserRead.model_validate(doc) if doc else None


async def read_user(*, db: AsyncDatabase, actor: Actor, user_id: str) -> UserRead:
    """A user by id, for admins; NotFound when there is no such user."""
    require_admin(actor, "manage users")
    return await get_user_or_raise(db=db, actor=actor, user_id=user_id)


async def get_user_or_raise(*, db: AsyncDatabase, actor: Actor, user_id: str) -> UserRead:
    """Like get_user, NotFound when there is no such user."""
    user = await get_user(db=db, actor=actor, user_id=user_id)
    if user is None:
        raise NotFound("No such user.")
    return user


EVERYONE = 100_000  # an upper bound, not a page: a desk's people number in the hundreds


async def everyone(*, db: AsyncDatabase) -> list[dict]:
    """Every person, by name (pickers and filters that must offer all of them, not a page)."""
    people, _ = await repo.page_by_name(db, {}, offset=0, limit=EVERYONE)
    return people


async def people(*, db: AsyncDatabase, actor: Actor) -> list[PersonRead]:
    """Everyone by name, with no more than a name (no email, no role): what an order's ids stand for."""
    _require_human(actor)
    return [PersonRead.model_validate(doc) for doc in await everyone(db=db)]


async def display_names(*, db: AsyncDatabase, user_ids: set[str]) -> dict[str, str]:
    """Names to show beside owner and actor ids (ids that are not users are left out)."""
    oids = [oid for oid in map(parse_object_id, user_ids) if oid]
    return await repo.names(db, oids) if oids else {}


async def update_user(*, db: AsyncDatabase, actor: Actor, user_id: str, data: UserAdminUpdate) -> UserRead:
    """An admin's change to a person; a deactivation or a password reset ends their sessions and API tokens."""
    require_admin(actor, "manage users")
    changes = data.changes()
    if not changes:
        raise NothingToChange()
    target = await get_user_or_raise(db=db, actor=actor, user_id=user_id)
    if actor.id == target.id and (changes.get("role", "admin") != "admin" or changes.get("active") is False):
        raise Forbidden("You cannot remove your own admin role or deactivate yourself.")
    shown = target.model_dump(by_alias=True)  # a value already stored is not written again; a password always is
    changes = {key: value for key, value in changes.items() if key not in shown or shown[key] != value}
    if not changes:
        return target
    _require_session_to_reset(actor, changes)
    if "role" in changes and access.RANK[str(changes["role"])] > access.RANK[target.role]:
        _require_recent_login(actor, "give someone a role that can do more")
    if "email" in changes:
        _require_recent_login(actor, "change an email address")
    if data.password is not None:
        passwords.check_policy(data.password)
        changes["passwordHash"] = await passwords.hash_password(changes.pop("password"))
        changes["failedLoginCount"] = 0
        changes["lockedUntil"] = None
    if "email" in changes and await repo.get_by_email(db, str(changes["email"])) is not None:
        raise Conflict("Someone else has that email.", details={"field": "email"})
    changes["updatedAt"] = now()
    try:  # the unique index settles a race between two admins
        doc = await repo.update(db, ObjectId(target.id), changes)
    except DuplicateKeyError:
        raise Conflict("Someone else has that email.", details={"field": "email"}) from None
    if doc is None:
        raise NotFound("No such user.")
    if data.password is not None or data.active is False:
        await auth_service.end_sessions(db=db, user_id=doc["_id"])
    # A reset closes every way in (whoever knew the old password may have made tokens), and so does a deactivation:
    # reactivating someone gives them back their account, not the tokens a script elsewhere may still hold.
    if data.password is not None or changes.get("active") is False:
        await auth_service.revoke_all_tokens(db=db, actor=actor, user_id=doc["_id"])
    _record_changes(actor, target, changes)
    await _audit_changes(db, actor, target, changes)
    if reason := _access_lost_by(target, changes):
        await access.access_lost(db=db, user_id=target.id, reason=reason)
    return UserRead.model_validate(doc)


async def unlock_user(*, db: AsyncDatabase, actor: Actor, user_id: str) -> UserRead:
    """An admin lifts a lock left by failed logins, so the person can log in at once."""
    require_admin(actor, "manage users")
    oid = parse_object_id(user_id)
    before = await repo.clear_failed_logins(db, oid) if oid else None
    if before is None:
        raise NotFound("No such user.")
    locked = before.get("lockedUntil") and before["lockedUntil"] > state.current().clock.now()  # the lockout's clock
    if locked:  # an unlock that lifted no lock is no event
        events.record("account_unlocked", actor_id=actor.id, subject_id=oid)
        details = {"name": before["name"]}
        await audit.record(db=db, actor=actor, action="account_unlocked", subject_id=oid, details=details)
    return UserRead.model_validate(before | repo.UNLOCKED)


def _record_changes(actor: Actor, before: UserRead, changes: dict[str, object]) -> None:
    """The security events in an admin's change: role, activation and password."""
    if "role" in changes:
        events.record(
            "role_changed", actor_id=actor.id, subject_id=before.id, before=before.role, after=changes["role"]
        )
    if "active" in changes:
        events.record("activation_changed", actor_id=actor.id, subject_id=before.id, active=changes["active"])
    if "passwordHash" in changes:
        events.record("password_reset", actor_id=actor.id, subject_id=before.id)


async def _audit_changes(db: AsyncDatabase, actor: Actor, before: UserRead, changes: dict[str, object]) -> None:
    """An admin's change in the desk-wide audit log, which admins read (kept a year).

    Name and email too, beside the security events: the email is what a person logs in with, so who
    changed it, and from what, stays on record. And AI assistance turned on or off for someone: what
    the agents may do for them.
    """
    who = {"name": before.name}
    if edited := [key for key in ("name", "email") if key in changes]:
        old, new = {key: getattr(before, key) for key in edited}, {key: str(changes[key]) for key in edited}
        details = who | {"before": old, "after": new}
        await audit.record(db=db, actor=actor, action="user_details_changed", subject_id=before.id, details=details)
    if "role" in changes:
        details = who | {"before": before.role, "after": changes["role"]}
        await audit.record(db=db, actor=actor, action="role_changed", subject_id=before.id, details=details)
    if "active" in changes:
        details = who | {"active": changes["active"]}
        await audit.record(db=db, actor=actor, action="activation_changed", subject_id=before.id, details=details)
    if "aiEnabled" in changes:  # an admin's switch; a person's own (their profile) is their preference, not logged
        details = who | {"aiEnabled": changes["aiEnabled"]}
        await audit.record(db=db, actor=actor, action="ai_access_changed", subject_id=before.id, details=details)
    if "passwordHash" in changes:
        await audit.record(db=db, actor=actor, action="password_reset", subject_id=before.id, details=who)


def _access_lost_by(before: UserRead, changes: dict[str, object]) -> access.Reason | None:
    """What, in an admin's change, takes access away from the person (the gravest when there are several)."""
    if changes.get("active") is False:
        return "deactivated"
    if "passwordHash" in changes:
        return "password_reset"
    if "role" in changes and access.reduces_access(before.role, str(changes["role"])):
        return "role_reduced"
    if changes.get("aiEnabled") is False:
        return "ai_off"
    return None


async def set_own_ai(*, db: AsyncDatabase, actor: Actor, enabled: bool) -> UserRead:
    """A person turns AI assistance on or off for themselves."""
    _require_human(actor)
    doc = await repo.update(db, ObjectId(actor.id), {"aiEnabled": enabled, "updatedAt": now()})
    if doc is None:
        raise NotFound("No such user.")
    if not enabled:
        await access.access_lost(db=db, user_id=actor.id, reason="ai_off")
    return UserRead.model_validate(doc)


async def change_own_password(
    *,
    db: AsyncDatabase,
    actor: Actor,
    current: str,
    new: str,
    keep_session: str | None = None,
    revoke_tokens: bool = False,
) -> None:
    """Change one's own password after checking the current one; every other session ends, and the tokens if asked."""
    _require_human(actor)
    # Per account: a stolen session cannot be used to guess the password behind it.
    key = f"password-check:{actor.id}"
    window = await auth_service.limit_rate(
        db=db, key=key, per_minute=PASSWORD_CHECKS_PER_MINUTE, message="Too many wrong tries at your current password"
    )
    doc = await repo.get(db, ObjectId(actor.id))
    if doc is None or not await passwords.verify_password(doc["passwordHash"], current):
        events.record("password_change_failed", actor_id=actor.id, subject_id=actor.id, reason="wrong_password")
        # 403, not 400: the request is valid (no schema can know the password); the person did not prove who they are
        raise Forbidden("The current password is not right.", details={"field": "currentPassword"})
    await auth_service.forgive_hit(db=db, key=key, window_end=window)  # only wrong tries count, as at login
    if new == current:  # a "change" that ends the person's other sessions and changes nothing
        same = "The new password is your current one; choose another."
        raise ValidationFailed(same, details={"field": "newPassword"})
    passwords.check_policy(new, field="newPassword")
    await repo.update(db, doc["_id"], {"passwordHash": await passwords.hash_password(new), "updatedAt": now()})
    await auth_service.end_sessions(db=db, user_id=doc["_id"], keep_secret=keep_session)
    events.record("password_changed", actor_id=actor.id, subject_id=actor.id, tokensRevoked=revoke_tokens)
    if revoke_tokens:  # whoever knew the old password may have made tokens: the person decides
        await auth_service.revoke_all_tokens(db=db, actor=actor, user_id=doc["_id"])
