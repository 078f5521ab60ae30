"""Which provider failures pass and which do not, and how long a provider asked us to wait (issue 41).

Transient: the provider could not answer now (no connection, a timeout, a stream dropped or cut short,
an error chunk mid-stream, 408, 429, 5xx). The same request may well succeed in a minute, so the work
waits for it: an outage pauses the desk's agents, it does not fail their work.
Permanent: the provider answered and refused (any other 4xx: a bad key, a model that does not exist, a
request it will not take), or answered in a way the desk never accepts (a redirect, SEC-2; a stream that
breaks the protocol; one past the byte cap). The same request would fail again, so it is given up at once.
"""

import email.utils
import math
import re
from datetime import UTC, datetime

import httpx

# The provider's own failure kinds (provider.py) that pass: the answer was cut off, not refused.
TRANSIENT_KINDS = frozenset({"deadline", "truncated", "provider_error", "no_completion"})
# A provider may ask for any wait; past this the desk asks again anyway (an hour of a paused queue is plenty).
MAX_RETRY_AFTER = 3600.0
_SECONDS = re.compile(r"^[0-9]{1,9}(\.[0-9]+)?$")


def transient_status(status: int) -> bool:
    """408 (it timed out), 429 (slow down) and 5xx (the provider's trouble) pass; any other 4xx is the request's."""
    return status in (408, 429) or status >= 500


def transient_error(error: httpx.HTTPError) -> bool:
    """A connection refused or dropped, a timeout, a proxy that could not reach it: the network's, so it passes.

    Not a request the client itself could not make (an unsupported scheme), nor a body it could not decode.
    """
    refused_here = (httpx.UnsupportedProtocol, httpx.LocalProtocolError)
    return isinstance(error, httpx.TransportError) and not isinstance(error, refused_here)


def retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """The seconds a `Retry-After` header asks for (delay-seconds or an HTTP date), within 0..MAX_RETRY_AFTER;
    None when there is none or it cannot be read."""
    if not value:
        return None
    value = value.strip()
    if _SECONDS.match(value):
        seconds = float(value)
    else:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        when = when if when.tzinfo else when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if not math.isfinite(seconds):
        return None
    return min(MAX_RETRY_AFTER, max(0.0, seconds))
