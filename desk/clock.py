"""The process's time, as one object a test can stand in for: wall time in UTC, and a monotonic count.

Code that counts per minute or trusts something for a while reads the process's clock (the Desk's,
desk/state.py) or is handed one, instead of reading the system's time itself, so a test moves time
instead of waiting for it (tests/clock.py).
"""

import time
from datetime import UTC, datetime


class Clock:
    """The system's clocks."""

    def now(self) -> datetime:
        """UTC now, cut to milliseconds: what MongoDB stores, so values round-trip equal."""
        moment = datetime.now(UTC)
        return moment.replace(microsecond=moment.microsecond // 1000 * 1000)

    def monotonic(self) -> float:
        """Seconds from an arbitrary start, never going back: for how long something took or may still take."""
        return time.monotonic()


SYSTEM_CLOCK = Clock()  # stateless: one is as good as another (a Desk's, unless a test gives it its own)
