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

# The kinds of notification (desk.notifications.models.Kind), as preferences name them
NOTIFICATION_KINDS = {
    "assigned": "An order is given to me or taken from me",
    "commented": "Someone comments on an order I asked for, work on or commented on",
    "statusChanged": "An order I asked for changes status",
    "flagged": "The triage agent flags an order for the dispatcher (admins)",
}
NOTIFICATION_CHANNELS = {"inApp": "In the desk", "email": "By email"}
