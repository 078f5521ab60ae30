"""A person's notifications and preferences: reading and marking their bell, their switches, the desk's defaults.

Everyone reads and marks only their own bell (the actor's id is the only one used); admins alone set the desk's
defaults; an unsubscribe token stands in for a login, for one person and the kinds it names.
"""

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk import access
from desk.actors import Actor
from desk.errors import NotFound, NothingToChange
from desk.notifications import preferences, unsubscribe
from desk.notifications import repository as repo
from desk.notifications.models import (
    MarkRead,
    NotificationPage,
    NotificationQuery,
    NotificationRead,
    Preferences,
    PreferencesUpdate,
)
from desk.work_orders import changes, permissions


async def page(*, db: AsyncDatabase, actor: Actor, query: NotificationQuery) -> NotificationPage:
    """A page of the actor's notifications, newest first, with how many there are and how many are unread."""
    me = _me(actor)
    docs = await repo.page(db, me, unread=query.unread, offset=query.offset, limit=query.limit)
    total = await repo.count(db, me, unread=query.unread)
    unread = total if query.unread else await repo.count(db, me, unread=True)
    return NotificationPage(items=[NotificationRead.model_validate(doc) for doc in docs], total=total, unread=unread)


async def unread(*, db: AsyncDatabase, actor: Actor) -> int:
    """How many of the actor's notifications are unread (the bell's number)."""
    return await repo.count(db, _me(actor), unread=True)


async def mark_read(*, db: AsyncDatabase, actor: Actor, data: MarkRead) -> int:
    """Mark some (or all) of the actor's notifications read; how many are still unread. Ids of others' are ignored."""
    me = _me(actor)
    ids = [ObjectId(value) for value in data.ids] if data.ids is not None else None
    if await repo.mark_read(db, me, ids):
        await changes.ring(db, {actor.id})  # the bell in the actor's other tabs and processes
    return await repo.count(db, me, unread=True)


async def get_preferences(*, db: AsyncDatabase, actor: Actor) -> Preferences:
    """The actor's switches as they apply now (the desk's defaults where they set none)."""
    me = _me(actor)
    return Preferences.model_validate((await preferences.effective(db, [me]))[me])


async def update_preferences(*, db: AsyncDatabase, actor: Actor, data: PreferencesUpdate) -> Preferences:
    """Change some of the actor's switches; the rest stay as they are."""
    await repo.set_preferences(db, _me(actor), _switches(data))
    return await get_preferences(db=db, actor=actor)


async def get_desk_defaults(*, db: AsyncDatabase, actor: Actor) -> Preferences:
    """The switches of everyone who set none of their own (admins)."""
    access.require_admin(actor, "see the desk's notification defaults")
    return Preferences.model_validate(await preferences.desk_defaults(db))


async def update_desk_defaults(*, db: AsyncDatabase, actor: Actor, data: PreferencesUpdate) -> Preferences:
    """Change some of the desk's default switches (admins); people's own choices stay theirs."""
    access.require_admin(actor, "change the desk's notification defaults")
    await repo.set_preferences(db, repo.DESK, _switches(data))
    return await get_desk_defaults(db=db, actor=actor)


async def unsubscribe_by_token(*, db: AsyncDatabase, token: str) -> list[str]:
    """Turn off the kinds of email a token names for its person (no login: the signed token is the proof)."""
    found = await unsubscribe.read(db, token)
    if found is None:
        raise NotFound("This unsubscribe link is not valid.")
    person, kinds = found
    await repo.set_preferences(db, person, {"email": dict.fromkeys(kinds, False)})
    return list(kinds)


def _switches(data: PreferencesUpdate) -> dict[str, dict[str, bool]]:
    switches = data.switches()
    if not any(switches.values()):
        raise NothingToChange()
    return switches


def _me(actor: Actor) -> ObjectId:
    permissions.require_person(actor)
    return ObjectId(actor.id)
