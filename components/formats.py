"""How dates, people and money read on screen."""

import math
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


def usd(amount: float) -> str:
    """`$0.0012`; under a hundredth of a cent, to its first two significant digits (`$0.000021`), so a run
    of a few hundred tokens reads what it cost, not `$0.0000`, and its figures add up to the day's ledger."""
    if amount <= 0:
        return "$0.0000"
    decimals = max(4, min(10, 1 - math.floor(math.log10(amount))))
    return f"${amount:,.{decimals}f}"
