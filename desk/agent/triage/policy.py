"""The triage policy (spec AGT-3): a singleton AgentConfig, its append-only audit, and the rules read from it.

The config is seeded from AGENT_TRIAGE_MODE / AGENT_WORKING_HOURS / AGENT_TIME_ZONE at first start and
is the admins' from then on. Every change (the triage agent's own `enabled` too) is conditional on the
version read, and appends an AgentConfigAudit entry; nothing updates or deletes an audit entry (SEC-13).
The desk-wide kill switch is not in it (desk/agent/core/switch.py): flipping that moves no version.
"""

import contextlib
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from desk import hours
from desk.access import require_admin
from desk.actors import Actor
from desk.agent.core import budget, switch
from desk.agent.triage.models import AgentConfigAuditRead, AgentConfigRead, AgentConfigUpdate
from desk.config import Settings
from desk.errors import Conflict, NothingToChange, ValidationFailed
from desk.schema import OffsetPage, now

Doc = dict[str, Any]
AGENT = "triage"
DEFAULT_DAILY_ACTION_CAP = 200
POLICY_FIELDS = (
    "enabled",
    "mode",
    "allowedFields",
    "dailyActionCap",
    "flagThreshold",
    "workingHours",
    "timeZone",
    "daysOff",
    "applyWhen",
)


async def ensure_indexes(db: AsyncDatabase) -> None:
    await db["agent_config_audit"].create_index([("agentName", ASCENDING), ("createdAt", DESCENDING)], name="agent")
    if (stored := await db["agent_config"].find_one({"_id": AGENT})) is not None:  # a desk from before the mirror
        await budget.set_desk_zone(db, zone(stored))


def zone(config: Doc) -> str:
    """The policy's time zone: its working hours, its daily action cap's day and the spend ledger's days."""
    return config.get("timeZone") or "UTC"


def seed(settings: Settings) -> Doc:
    """The config a desk starts with, from its environment."""
    return {
        "_id": AGENT,
        "enabled": True,
        "mode": "auto_apply" if settings.agent_triage_mode == "auto-apply" else "suggest",
        "allowedFields": ["priority"],
        "dailyActionCap": DEFAULT_DAILY_ACTION_CAP,
        "flagThreshold": "urgent",
        "workingHours": settings.agent_working_hours,
        "timeZone": settings.agent_time_zone,
        "daysOff": [],
        "applyWhen": "any",
        "version": 1,
        "updatedBy": None,
        "updatedAt": now(),
    }


async def current(db: AsyncDatabase, settings: Settings) -> Doc:
    """The stored config, seeded on first read (every process may race to seed; one insert wins).

    Read again until there is one: gone between the seeding and the read (a restore, a test emptying
    the database under a running worker), it was once returned as None, and the worker's poll failed.
    """
    while (found := await db["agent_config"].find_one({"_id": AGENT})) is None:
        with contextlib.suppress(DuplicateKeyError):
            seeded = seed(settings)
            await db["agent_config"].insert_one(seeded)
            await budget.set_desk_zone(db, zone(seeded))  # the copilot's bills count the same days
    return found


async def current_with_switch(db: AsyncDatabase, settings: Settings) -> tuple[Doc, switch.Switch]:
    """The stored config and the desk-wide AI switch, in one read (the worker's look before a claim)."""
    found, desk = await switch.read_beside(db, AGENT)
    return (found if found is not None else await current(db, settings)), desk


async def get_config(*, db: AsyncDatabase, settings: Settings, actor: Actor) -> AgentConfigRead:
    """The triage policy (admins only)."""
    require_admin(actor, "see or change the agents' settings")
    return AgentConfigRead.model_validate(await current(db, settings))


async def update_config(
    *, db: AsyncDatabase, settings: Settings, actor: Actor, data: AgentConfigUpdate
) -> AgentConfigRead:
    """Change policy fields at the version the admin read; Conflict when someone saved first."""
    require_admin(actor, "see or change the agents' settings")
    fields = data.model_dump(exclude_none=True, by_alias=True, exclude={"version"})
    if not fields:
        raise NothingToChange()
    if "timeZone" in fields:
        _check_zone(fields["timeZone"])
    return await _change(db, settings, actor, fields, version=data.version, action="config_updated")


async def audit(
    *, db: AsyncDatabase, actor: Actor, offset: int = 0, limit: int = 25
) -> OffsetPage[AgentConfigAuditRead]:
    """The audit trail of the agents' settings and of admins' views of transcripts, newest first."""
    require_admin(actor, "see or change the agents' settings")
    cursor = db["agent_config_audit"].find({}).sort([("createdAt", DESCENDING), ("_id", DESCENDING)])
    items = [AgentConfigAuditRead.model_validate(doc) for doc in await cursor.skip(offset).limit(limit).to_list()]
    total = await db["agent_config_audit"].count_documents({})
    return OffsetPage[AgentConfigAuditRead](items=items, total=total, offset=offset, limit=limit)


async def record(db: AsyncDatabase, *, agent: str, actor_id: str, action: str, before=None, after=None) -> None:
    """Append one audit entry (the only write this collection ever gets)."""
    entry = {"agentName": agent, "actorId": actor_id, "action": action, "before": before, "after": after}
    await db["agent_config_audit"].insert_one({**entry, "createdAt": now()})


def in_working_hours(config: Doc, moment: datetime) -> bool:
    """Whether `moment` falls in the config's working hours and not on a day off, read in its time zone."""
    return hours.is_open(*_hours_of(config), moment)


def opens_at(config: Doc, moment: datetime) -> datetime | None:
    """When the config's working hours next begin from `moment` (`moment` itself inside them; None: not within
    a year)."""
    return hours.next_opening(*_hours_of(config), moment)


def _hours_of(config: Doc) -> tuple[str, str, list[str]]:
    return config.get("workingHours", "*"), config.get("timeZone") or "UTC", config.get("daysOff") or []


def overruled(config: Doc, settings: Settings) -> list[str]:
    """The environment keys whose value differs from the stored policy's (which wins: it is the admins')."""
    wanted = seed(settings)
    keys = (("AGENT_TRIAGE_MODE", "mode"), ("AGENT_WORKING_HOURS", "workingHours"), ("AGENT_TIME_ZONE", "timeZone"))
    return [key for key, field in keys if config.get(field) != wanted[field]]


async def _change(db: AsyncDatabase, settings: Settings, actor: Actor, fields: Doc, *, version: int, action: str):
    before = await current(db, settings)
    match = {"_id": AGENT, "version": version}
    after = await db["agent_config"].find_one_and_update(
        match,
        {"$set": {**fields, "updatedBy": actor.id, "updatedAt": now()}, "$inc": {"version": 1}},
        return_document=ReturnDocument.AFTER,
    )
    if after is None:
        current_doc = AgentConfigRead.model_validate(await current(db, settings)).model_dump(mode="json", by_alias=True)
        raise Conflict("Someone else changed the triage settings first. Reload them.", details={"current": current_doc})
    if zone(after) != zone(before):
        await budget.set_desk_zone(db, zone(after))  # the ledger's days follow the policy's (the copilot's too)
    await record(db, agent=AGENT, actor_id=actor.id, action=action, before=_policy(before), after=_policy(after))
    return AgentConfigRead.model_validate(after)


def _policy(doc: Doc) -> Doc:
    return {key: doc.get(key) for key in POLICY_FIELDS}


def _check_zone(name: str) -> None:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationFailed(
            "timeZone must be an IANA time zone such as Europe/Berlin.", details={"field": "timeZone"}
        ) from None
