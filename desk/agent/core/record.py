"""A run as stored: the run document, its messages and tool calls, and (in a conversation) the history mark.

Anything an agent keeps of a run goes through a `RunRecord`. The copilot's has a session: its
messages join the conversation, its window of earlier turns is kept in memory (`history`), and
letting the session go leaves the mark that says whether that window is still current. An agent
working on its own (the triage agent: mode "autonomous", no session) uses the same record without one.
"""

import asyncio
import contextlib
import logging
import time
from datetime import timedelta
from typing import Any

from bson import ObjectId
from bson.errors import InvalidDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import PyMongoError

from desk import state
from desk.agent.core import history
from desk.agent.core.events import RunStatus
from desk.agent.core.history import WINDOW, Message, kept
from desk.agent.core.pipeline import ToolAnswer
from desk.agent.core.provider import ToolCallRequest
from desk.agent.core.state import RunEnded, not_stored
from desk.agent.core.store import agent_messages, agent_runs, agent_tool_calls, copilot_sessions
from desk.logs import failure

log = logging.getLogger(__name__)
LEASE = timedelta(seconds=60)  # a running run's lease; the sweeper ends a run whose lease ran out


class RunRecord:
    def __init__(
        self,
        *,
        db: AsyncDatabase,
        run: dict,
        session: dict | None = None,
        window: list[Message] | None = None,
        lease: timedelta | None = None,
    ) -> None:
        """`run` from `agent_runs.new_run`, not stored yet; `window`: the session's newest messages (None: read)."""
        self.db, self.run, self.session = db, run, session
        self.lease = lease if lease is not None else LEASE
        self.window = window if session is not None or window is not None else []  # no session: nothing earlier
        self.last_message: ObjectId | None = session.get("historyMark") if session else None
        self.unsure = False  # a message write failed or was cut short: the window may not match the database
        self.content = ""  # the first message (the person's; never empty once `take` took it)
        self.stored = False  # the run document is in the database
        self.unwritten: list[dict[str, Any]] = []  # an agent's prompt, stored with its next message or its end
        self._writes: asyncio.Task | None = None

    @property
    def stored_id(self) -> ObjectId | None:
        """The run's id once it is stored (what its usage may be added to), else None."""
        return self.run["_id"] if self.stored else None

    def take(self, content: str, message: Message | None = None) -> None:
        """Take the run's first message; it and the run are stored once `store` is called.

        Stored later, not now: on one event loop and one database those writes would go before the
        first token. With a real model they happen while it writes its answer. Anything that needs
        them stored (a tool call, the run's end, a refusal) starts them itself (`recorded`).
        `message`: `content` as the window keeps it, when the caller has made it already.
        """
        self.content = content
        if self.window is not None:  # stamped before it is stored: memory forgets it first, never last
            self.window.append(message or kept("user", content))

    def store(self) -> None:
        """Start storing the run and its first message (once); the run's own writes wait for them."""
        if self._writes is not None or not self.content:  # started already, or nothing to store
            return
        name = f"{self.run['agentName']}-records-{self.run['_id']}"
        self._writes = asyncio.create_task(self._write_first(self.content), name=name)
        state.current().keep(
            self._writes, failure=f"could not store a {self.run['agentName']} run", expected=(RunEnded,)
        )

    async def open(self, messages: list[dict[str, Any]]) -> None:
        """An agent working on its own: store the run; its prompt (`{role, content}` each, in order) is stored with
        the run's next message (the model's answer) or its end, in the same write: one round trip less a pass."""
        await agent_runs.insert_run(self.db, self.run)
        self.stored = True
        session_id = self.session["_id"] if self.session is not None else None
        # ids now: the prompt sorts before its answer (run_messages breaks createdAt ties by _id)
        self.unwritten = [{"_id": ObjectId(), "sessionId": session_id, "runId": self.run["_id"], **m} for m in messages]

    async def recorded(self) -> bool:
        """Wait until the run and its first message are stored; False if that failed."""
        self.store()
        if self._writes is None:
            return True
        with contextlib.suppress(Exception):
            await asyncio.shield(self._writes)
        return not self._writes.cancelled() and self._writes.exception() is None

    @property
    def settled(self) -> bool:
        """Storing the run and its first message has ended, well or not (checked without waiting)."""
        return self._writes is not None and self._writes.done()

    async def require(self) -> None:
        """The run ends here, as an error, when its own record or its first message could not be stored."""
        if not await self.recorded():
            raise not_stored()

    async def conversation(self) -> list[Message]:
        """The session's newest messages, this run's first message last (read from the database when not kept)."""
        if self.window is None:  # not kept in this process (or not current): the database knows
            earlier = await agent_messages.session_messages(self.db, self.session["_id"], limit=WINDOW)
            # this run's own message may be stored already (it is written meanwhile): it is added below
            mine = self.run["_id"]
            self.window = [kept(m["role"], m["content"], m["createdAt"]) for m in earlier if m.get("runId") != mine]
            self.window.append(kept("user", self.content))
        return self.window

    async def renew(self) -> bool:
        """Extend the run's lease; False when it no longer runs (ended elsewhere: a logout, the sweeper)."""
        return await agent_runs.renew_lease(self.db, self.run["_id"], self.lease)

    async def say(self, role: str, content: str | None, *, into_window: bool = True, **extra: Any) -> None:
        """Store one message of the run; one that cannot be stored ends the run (`record_failed`)."""
        message_id = ObjectId()
        self.unsure = True
        session_id = self.session["_id"] if self.session is not None else None
        message = {"_id": message_id, "sessionId": session_id, "runId": self.run["_id"], "role": role}
        earlier, self.unwritten = self.unwritten, []
        try:
            stored_at = await agent_messages.add_messages(self.db, [*earlier, {**message, "content": content, **extra}])
        except (PyMongoError, InvalidDocument) as error:
            # the type only: a driver's message may quote the document, and with it the person's words (SEC-1)
            log.error("could not store a %s message (%s)", self.run["agentName"], failure(error))
            raise not_stored() from None
        self.unsure = False
        self.last_message = message_id
        if into_window and self.window is not None:  # stamped as stored: it leaves memory when it leaves the database
            self.window.append(kept(role, content, stored_at))

    async def tool_call(self, request: ToolCallRequest, answer: ToolAnswer, started: float) -> None:
        """Store a tool call that was answered without being staged (a staged one is its own record)."""
        await agent_tool_calls.insert_tool_call(
            self.db,
            {
                "_id": answer.id,
                "runId": self.run["_id"],
                "userId": self.run["userId"],
                "tool": request.name[:80],
                "callId": request.id,
                "args": answer.args,
                "outcome": answer.outcome,
                "result": answer.result,
                "latencyMs": int((time.monotonic() - started) * 1000),
            },
        )

    async def finish(self, status: RunStatus, code: str | None = None, *, usage: dict | None = None) -> RunStatus:
        """End the run as `status` unless someone else (a logout, the sweeper) ended it first; returns how it ended.

        `usage` is the last model call not yet on the run (`Meter.take_pending`), added in the same write.
        """
        if not await self.recorded():
            status, code = "error", "record_failed"  # what was stored of it (if anything) says why it stopped
        finished = agent_runs.finish_run(self.db, self.run["_id"], status, error_code=code, usage=usage)
        earlier, self.unwritten = self.unwritten, []
        if earlier:  # it ended before the model answered (an error, a cancel): its prompt is stored beside its end
            _, moved = await asyncio.gather(agent_messages.add_messages(self.db, earlier), finished)
        else:
            moved = await finished
        await self.ended()
        if moved:
            return status
        stored = await agent_runs.get_run(self.db, self.run["_id"])
        return stored["status"] if stored else status

    async def ended(self) -> None:
        """What else a run leaves settled when it ends, whoever ended it (`CopilotRecord`: its approvals)."""

    async def release(self) -> None:
        """Free the session, leaving the mark that tells the next turn whether our window is still current."""
        if self.session is None:
            return
        if not await self.recorded() or self.unsure or self.window is None:
            mark = ObjectId()  # matches no window anywhere: the next turn reads the database
            history.HISTORIES.drop(self.session["_id"])
        else:
            mark = self.last_message
            history.HISTORIES.put(self.session["_id"], mark, self.window)
        await copilot_sessions.release_session(self.db, self.session["_id"], self.run["_id"], history_mark=mark)

    async def _write_first(self, content: str) -> None:
        # In order: a message never points at a run that was not stored.
        await agent_runs.insert_run(self.db, self.run)
        self.stored = True
        await self.say("user", content, into_window=False)  # `take` put it there: the model call must not wait
