"""Why an auto-apply pass leaves its suggestion a suggestion: what the policy says, then what the order says.

Each answers a note (stored as the suggestion's `appliedNote` and the run's end) or None: it may be applied.
People first (issue 41): a priority a person set since the model read the order stands.
"""

from desk.work_orders import triage_door as work_orders
from desk.work_orders.models import CLOSED, PRIORITIES


def policy_says(config: dict, order: dict, suggestion: dict) -> str | None:
    """Why the policy stored now keeps this suggestion a suggestion (None: it may be applied)."""
    if config["mode"] != "auto_apply" or "priority" not in config["allowedFields"]:
        return "not_auto"
    if suggestion["suggestedPriority"] == order["priority"]:
        return "not_auto"  # nothing to change
    if not config["enabled"]:
        return "disabled"
    lowers = PRIORITIES.index(suggestion["suggestedPriority"]) < PRIORITIES.index(order["priority"])
    if lowers and config.get("applyWhen", "any") == "raise_only":
        return "raise_only"  # this desk lets the agent raise urgency, never lower what a person chose
    return None


def order_says(target: work_orders.TriageTarget | None, order: dict, suggestion: dict) -> str | None:
    """Why the order as it is now keeps this suggestion a suggestion (None: it may be applied)."""
    if target is None or not target.ai_allowed:
        return "ai_disabled_for_owner" if target else "order_deleted"
    if target.order.priority not in (order["priority"], suggestion["suggestedPriority"]):
        return "overtaken"  # a person set it since the model read it: theirs stands, as on a person's accept
    if target.order.status in CLOSED:
        return "order_closed"
    return None
