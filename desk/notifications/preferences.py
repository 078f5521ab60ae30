"""Preferences: the desk's defaults (set by admins), overlaid with each person's own switches."""

from typing import Any

from bson import ObjectId
from pymongo.asynchronous.database import AsyncDatabase

from desk.notifications import repository as repo
from desk.notifications.models import CHANNELS, DESK_DEFAULTS, KINDS

Switches = dict[str, dict[str, bool]]


def overlay(base: Switches, doc: dict[str, Any] | None) -> Switches:
    """`base` with the switches a stored document sets (any it leaves out, or holds wrongly, stay as in `base`)."""
    doc = doc or {}
    return {
        channel: {kind: bool(doc.get(channel, {}).get(kind, base[channel][kind])) for kind in KINDS}
        for channel in CHANNELS
    }


async def effective(db: AsyncDatabase, user_ids: list[ObjectId]) -> dict[ObjectId, Switches]:
    """Each person's switches as they apply now, in one read whatever their number."""
    desk, people = await repo.preferences(db, list(set(user_ids)))
    defaults = overlay(DESK_DEFAULTS, desk)
    return {person: overlay(defaults, people.get(person)) for person in user_ids}


async def desk_defaults(db: AsyncDatabase) -> Switches:
    desk, _ = await repo.preferences(db, [])
    return overlay(DESK_DEFAULTS, desk)
