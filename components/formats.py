"""How dates and people read on screen."""

from datetime import UTC, datetime


def when(moment: datetime | None) -> str:
    """`29 Nov 2026, 14:05 UTC`; an empty string for no date."""
    return moment.astimezone(UTC).strftime("%d %b %Y, %H:%M UTC") if moment else ""


def ago(moment: datetime, now: datetime | None = None) -> str:
    """A short relative time: `just now`, `5 min ago`, `3 h ago`, `2 days ago`."""
    seconds = ((now or datetime.now(UTC)) - moment).total_seconds()
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    days = int(seconds // 86400)
    return f"{days} day{'s' if days > 1 else ''} ago"
