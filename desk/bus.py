"""Topics inside one process: who wants to hear about an order, a tool call, a person's access.

A publisher names a topic and a key (an order's id, a tool call's id, a person's id); the bus calls
each handler of that key, then each of the whole topic (subscribed with key None), in the order they
subscribed, and awaits those that return an awaitable. What happens in other processes reaches the bus
through the change feed: the web runtime's poller publishes each batch of work-order changes as
"order" (components/runtime/live.py), so a page never needs to know where a change was made.

The bus belongs to the process's `Desk` (desk/state.py); nothing here is module-level.
"""

import asyncio
import contextlib
import inspect
import logging
import weakref
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Literal

from desk.logs import failure

log = logging.getLogger(__name__)

# "order": a batch of work-order changes (the key is None: the feed is one stream);
# "tool_call": a staged change was decided (key: the tool call's id);
# "access": a person lost some access (key: their id; message: the reason, desk.users.access.Reason);
# "person": this process's copilot turns of a person must stop (key: their id), after their runs were ended;
# "run": one run must stop (key: the run's id: Stop pressed on any page or tab);
# "conversation": a person's copilot panels in this process follow a new turn or conversation (key: their id);
# "bell": a person's notifications changed (key: their id), from the change feed in any process;
# "switch": an admin turned AI off for the whole desk (key None): every copilot turn of this process stops;
# "ai_switch": this process saw the desk-wide AI switch turned the other way, off or on (key None; message: the
# switch as read): open pages' headers follow it.
Topic = Literal["order", "tool_call", "access", "person", "run", "conversation", "switch", "ai_switch", "bell"]
Handler = Callable[[Any], Awaitable[None] | None]


class _Strong:
    """A handler held for as long as it is subscribed (called like a weak reference)."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler

    def __call__(self) -> Handler:
        return self.handler


class Bus:
    def __init__(self) -> None:
        self._handlers: dict[tuple[Topic, str | None], list[Callable[[], Handler | None]]] = {}  # in order

    def subscribe(self, topic: Topic, key: str | None, handler: Handler, *, weak: bool = False) -> Callable[[], None]:
        """Call `handler(message)` for each publication on `topic` and `key` (None: every key); returns unsubscribe.

        `weak`: a bound method is held weakly, so an object nobody keeps (a turn never streamed) is
        forgotten without unsubscribing.
        """
        handlers = self._handlers.setdefault((topic, key), [])
        if not weak and any(getattr(ref, "handler", None) == handler for ref in handlers):
            return lambda: None  # subscribed already (wiring twice is a no-op): its first unsubscribe stands
        ref = weakref.WeakMethod(handler) if weak else _Strong(handler)  # type: ignore[arg-type]
        handlers.append(ref)

        return lambda: self._drop(topic, key, ref)

    async def publish(self, topic: Topic, key: str | None, message: Any = None) -> None:
        """Tell the subscribers; one that fails is logged (never its message, which may quote words) and skipped."""
        for listed in (key, None) if key is not None else (None,):
            for ref in list(self._handlers.get((topic, listed), ())):
                handler = ref()
                if handler is None:
                    self._drop(topic, listed, ref)
                    continue
                try:
                    result = handler(message)
                    if inspect.isawaitable(result):
                        await result
                except Exception as error:
                    log.error("a %s subscriber failed (%s)", topic, failure(error))

    @contextlib.contextmanager
    def waiting(self, topic: Topic, key: str) -> Iterator[asyncio.Event]:
        """An event set by each publication on `topic` and `key` while the block runs (the caller clears it)."""
        event = asyncio.Event()
        unsubscribe = self.subscribe(topic, key, lambda _: event.set())
        try:
            yield event
        finally:
            unsubscribe()

    def subscribers(self, topic: Topic, key: str | None) -> int:
        """How many live handlers listen to exactly `topic` and `key` (what a test looks at after they end)."""
        return sum(1 for ref in self._handlers.get((topic, key), ()) if ref() is not None)

    def _drop(self, topic: Topic, key: str | None, ref: Callable[[], Handler | None]) -> None:
        handlers = self._handlers.get((topic, key), [])
        with contextlib.suppress(ValueError):
            handlers.remove(ref)
        if not handlers:
            self._handlers.pop((topic, key), None)
