"""One run at a time: a click that comes while the last one is still saving does nothing.

A double-click sends two clicks before the first has saved: without this a comment posts twice, a
new order is made twice, and the second "Assign to me" meets the version the first just moved on.
"""

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec

P = ParamSpec("P")


def one_at_a_time(handler: Callable[P, Awaitable[object]]) -> Callable[P, Awaitable[None]]:
    """`handler`, ignoring calls while a call of it is still running (each wrapped handler on its own)."""
    running = False

    @functools.wraps(handler)
    async def guarded(*args: P.args, **kwargs: P.kwargs) -> None:
        nonlocal running
        if running:
            return
        running = True
        try:
            await handler(*args, **kwargs)
        finally:
            running = False

    return guarded
