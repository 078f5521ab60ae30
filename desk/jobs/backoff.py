"""How long a failed job waits before its next try: exponential in the attempts made, with jitter."""

import random

BASE_SECONDS = 2.0  # the first retry waits 1-2 s, then 2-4 s, 4-8 s ... (full jitter on the upper half)
MAX_SECONDS = 600.0


def delay(attempts: int) -> float:
    """Seconds before the next try after `attempts` tries, jittered so that workers spread out."""
    ceiling = min(MAX_SECONDS, BASE_SECONDS * 2 ** max(0, attempts - 1))
    return ceiling / 2 + random.random() * ceiling / 2  # noqa: S311 - jitter, not a secret
