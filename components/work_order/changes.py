"""A work order in words for the person looking at it: what someone else changed, and why they may not."""

from desk.actors import Actor
from desk.db.client import get_db
from desk.labels import CHOICE_LABELS
from desk.users import service as users_service
from desk.work_orders import service
from desk.work_orders.models import EDITABLE, WorkOrderRead

# one's own save in a second tab: "You changed…" read as this tab's own edit, so that tab is named as such
COPILOT, TRIAGE, SELF = "Your copilot", "The triage agent", "Your other tab (or window)"


def why_read_only(actor: Actor, order: WorkOrderRead) -> str:
    """Why there is no form to edit this order: a person shown only text deserves to know."""
    if not actor.can_write:
        return "Viewers read work orders and comment on them; they do not change them."
    if order.owner_id is None:
        return "While it waits in the queue, only its requester or an admin changes it; “Assign to me” makes it yours."
    return "Only its requester, its owner or an admin can change this work order."


def _shown(field: str, value: object) -> str:
    labels = CHOICE_LABELS.get(field)
    text = labels.get(str(value), str(value)) if labels else f"“{value}”"
    return text if len(text) <= 140 else text[:140] + "…"


async def what_changed(before: WorkOrderRead, after: WorkOrderRead, *, who: str = "Someone else") -> list[str]:
    """What someone else changed, a line each: the fields of the form, then who works on it (`who`: as
    `changed_by` names them, for the lines' pronoun: "You" for one's own other tab, not "They")."""
    they = _pronoun(who)
    lines = [
        f"{they} changed {field}: {_shown(field, getattr(before, field))} → {_shown(field, getattr(after, field))}"
        for field in EDITABLE
        if getattr(before, field) != getattr(after, field)
    ]
    if after.owner_id != before.owner_id:
        names = await users_service.display_names(db=get_db(), user_ids={after.owner_id} - {None})
        lines.append(
            f"{they} gave it to {names.get(after.owner_id, 'someone')}."
            if after.owner_id
            else f"{they} put it back in the queue."
        )
    return lines


def _pronoun(who: str) -> str:
    return {SELF: "That tab", COPILOT: "It", TRIAGE: "It"}.get(who, "They")  # a colleague may be called Youssef


def pending(before: WorkOrderRead, edits: dict[str, object]) -> list[str]:
    """This tab's own edit, not saved, a line a field: beside what another tab saved, which is whose is plain."""
    return [
        f"{field}: {_shown(field, getattr(before, field, ''))} → {_shown(field, value)}"
        for field, value in edits.items()
    ]


def owner_values(entry) -> list[object]:
    return [side.get("ownerId") for side in (entry.before, entry.after) if side and side.get("ownerId")]


async def changed_by(actor: Actor, before: WorkOrderRead, after: WorkOrderRead) -> str:
    """Who made the change from `before` to `after`, as a sentence's subject for the person looking: their own
    save in another tab is not "someone else's", nor is their copilot's. The newest timeline entry that
    changed what differs tells (the form's fields first: the person's own "Assign to me" is not the news)."""
    fields = {field for field in EDITABLE if getattr(before, field) != getattr(after, field)}
    fields = fields or ({"ownerId"} if before.owner_id != after.owner_id else set())
    entries = await service.activity(db=get_db(), actor=actor, order_id=after.id, limit=10)
    entry = next((entry for entry in entries if fields & set(entry.after or {})), None)
    if entry is None:
        return "Someone else"
    if entry.actor_kind == "system":
        return TRIAGE
    if entry.actor_id == actor.id:
        return COPILOT if entry.run_id else SELF
    names = await users_service.display_names(db=get_db(), user_ids={entry.actor_id})
    return names.get(entry.actor_id, "Someone else")
