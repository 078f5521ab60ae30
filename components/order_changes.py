"""A work order in words for the person looking at it: what someone else changed, and why they may not."""

from components.chips import PRIORITY_LABELS, STATUS_LABELS
from desk.actors import Actor
from desk.db.client import get_db
from desk.users import service as users_service
from desk.work_orders.models import EDITABLE, WorkOrderRead


def why_read_only(actor: Actor, order: WorkOrderRead) -> str:
    """Why there is no form to edit this order: a person shown only text deserves to know."""
    if not actor.can_write:
        return "Viewers read work orders and comment on them; they do not change them."
    if order.owner_id is None:
        return "While it waits in the queue, only its requester or an admin changes it; “Assign to me” makes it yours."
    return "Only its requester, its owner or an admin can change this work order."


def _shown(field: str, value: object) -> str:
    labels = {"priority": PRIORITY_LABELS, "status": STATUS_LABELS}.get(field)
    text = labels.get(str(value), str(value)) if labels else f"“{value}”"
    return text if len(text) <= 140 else text[:140] + "…"


async def what_changed(before: WorkOrderRead, after: WorkOrderRead) -> list[str]:
    """What someone else changed, a line each: the fields of the form, then who works on it."""
    lines = [
        f"They changed {field}: {_shown(field, getattr(before, field))} → {_shown(field, getattr(after, field))}"
        for field in EDITABLE
        if getattr(before, field) != getattr(after, field)
    ]
    if after.owner_id != before.owner_id:
        names = await users_service.display_names(db=get_db(), user_ids={after.owner_id} - {None})
        lines.append(
            f"They gave it to {names.get(after.owner_id, 'someone')}."
            if after.owner_id
            else "They put it back in the queue."
        )
    return lines


def owner_values(entry) -> list[object]:
    return [side.get("ownerId") for side in (entry.before, entry.after) if side and side.get("ownerId")]
