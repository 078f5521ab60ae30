"""The words people see for the desk's fields and states: one catalog, so every page, chip, filter and message
that names a status, a priority or a run's end says it the same way.

Keys are the stored values (the API's); values are what a person reads. Pages and components take their words
from here; so does any server code that words the same things for people.
"""

PRIORITY_LABELS = {"low": "Low", "medium": "Medium", "high": "High", "urgent": "Urgent"}
STATUS_LABELS = {"pending": "Pending", "in_progress": "In progress", "done": "Done", "cancelled": "Cancelled"}
CHOICE_LABELS = {"priority": PRIORITY_LABELS, "status": STATUS_LABELS}  # an order's fields whose values have words
FIELD_NAMES = {  # an order's fields as a person reads them
    "title": "Title",
    "description": "Description",
    "priority": "Priority",
    "status": "Status",
    "ownerId": "Owner",
    "dueAt": "Due by",
}

ROLE_LABELS = {"admin": "Admin", "user": "User", "viewer": "Viewer"}
ROLE_NOUNS = {"admin": "an admin", "user": "a user", "viewer": "a viewer"}  # "Sam is now a viewer."

AGENT_NAMES = {"copilot": "Copilot", "triage": "Triage agent"}
RUN_STATUSES = {  # how an agent's run ended (desk.agent.core.events.RunStatus), for either agent
    "running": "Running",
    "complete": "Complete",
    "error": "Failed",
    "budget_exceeded": "Out of budget",
    "expired": "Approval expired",
    "aborted": "Stopped",
}
TOOL_OUTCOMES = {  # what became of one tool call (desk.agent.core.events.ToolOutcome)
    "ok": "OK",
    "error": "Failed",
    "unknown_tool": "Unknown tool",
    "forbidden": "Not allowed",
    "blocked": "Blocked",
    "need_read_first": "Needs a read first",
    "pending": "Waiting for approval",
    "executed": "Carried out",
    "rejected": "Rejected",
    "stale": "Out of date",
    "expired": "Approval expired",
    "aborted": "Stopped",
    "invalid": "Unusable output",
}
APPROVAL_STATUSES = {  # a proposed change's approval (desk.agent.core.events.ApprovalStatus)
    "pending": "Waiting",
    "approved": "Approved",
    "rejected": "Rejected",
    "expired": "Expired",
    "stale": "Out of date",
}

TRIAGE_MODES = {"suggest": "Suggest only (people decide)", "auto_apply": "Apply the priority automatically"}
POLICY_FIELDS = {  # the triage policy's fields (the API's names)
    "mode": "Mode",
    "workingHours": "Working hours",
    "timeZone": "Time zone",
    "dailyActionCap": "Daily action cap",
    "flagThreshold": "Flag threshold",
    "enabled": "Triage agent on",
    "allowedFields": "Fields it may change",
    "daysOff": "Days off",
    "applyWhen": "Apply when",
}
APPLY_WHEN = {  # auto-apply's direction (desk.agent.triage.models.ApplyWhen)
    "any": "Any change of priority",
    "raise_only": "Only a raise (never lower a priority)",
}
TRIAGE_OUTCOMES = {  # what one triage pass came to (desk.agent.triage.run.Kind; a manual run's `outcome`)
    "suggested": "Suggested",
    "applied": "Applied",
    "skipped": "Skipped",
    "failed": "Failed",
    "disabled": "Turned off",
    "over_budget": "Out of budget",
    "lease_lost": "Another worker took it over",
    "duplicate": "Another pass had already triaged it",
    "lost": "Another pass had it",  # stored before issue 41 split it into lease_lost and duplicate
}
RUN_ERRORS = {  # why a run ended as it did, or why the worker gave up on an event, in words (the store keeps the code)
    "invalid_output": "the model's answers were not a usable suggestion",
    "lease_expired": "a worker stopped while on it",
    "internal": "an error on our side (the worker's log says which)",
    "turned_off": "AI was turned off during it",
    "lease_lost": "another worker took the order over",
    "duplicate": "another pass had already triaged the order",
    "order_closed": "the order was closed",
    "order_deleted": "the order was deleted",
    "ai_disabled_for_owner": "the order's requester or owner turned AI off",
    "budget_exceeded": "a daily spend cap was reached",
    "daily_action_cap": "the daily cap on automatic changes was reached: left as a suggestion",
    "overtaken": "a person set the priority first: left as a suggestion",
    "raise_only": "it would have lowered the priority, which the policy leaves to people",
    "provider_fails_on_order": "the AI provider failed on this order every time, while answering others",
    "step_cap": "the conversation used up its steps",
    "ai_unreached": "the AI provider could not be reached (nothing was billed)",
    "AI_UNAVAILABLE": "the AI provider failed",
    "AI_BUDGET_EXCEEDED": "a daily spend cap was reached",
    "FORBIDDEN": "the person may no longer use AI",
}


def run_error(code: str | None) -> str:
    """A run's (or a failed event's) error code in words: "the AI provider failed (status 401)" for
    `provider_status 401`; a code with no words yet is shown as it is."""
    if code and code.startswith("provider_") and code not in RUN_ERRORS:
        return f"the AI provider failed ({code.removeprefix('provider_')})"
    return RUN_ERRORS.get(code or "", code or "no reason was kept")


# The kinds of notification (desk.notifications.models.Kind), as preferences name them
NOTIFICATION_KINDS = {
    "assigned": "An order is given to me or taken from me",
    "commented": "Someone comments on an order I asked for, work on or commented on",
    "statusChanged": "An order I asked for changes status",
    "flagged": "The triage agent flags an order for the dispatcher (admins)",
}
NOTIFICATION_CHANNELS = {"inApp": "In the desk", "email": "By email"}

# The triage eval's metrics (desk/agent/triage/eval/metrics.py), as its report and the Quality card name them
EVAL_METRICS = {
    "accuracy": "Accuracy",
    "macroF1": "Macro F1",
    "withinOne": "Within one level",
    "flagPrecision": "Flag precision",
    "flagRecall": "Flag recall",
    "flagF1": "Flag F1",
    "invalidRate": "Invalid answers",
}
