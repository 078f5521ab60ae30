"""The earlier turns of each conversation, kept in this process so a turn need not read them before the model.

Only the run holding a session writes its messages, and it stores the id of the last one on the
session when it lets go (`historyMark`, see copilot_sessions.claim_session). The next claim returns that mark,
so a window kept here is used only when it ends with exactly the message the database has last;
anything else (another web process took the last turn, a run died mid-write, a restart) reads
the database. That read is worth avoiding: up to 50 messages decoded by the database and the
driver before the model call can start. Measured with bench/copilot.py on 2026-11-30, turning this
memory off raised the added time to first token from 9-10 ms to 14.4 ms (p50) and the embedded
server's CPU per turn from about 7 to 11 ms.
"""

import json
from collections import OrderedDict
from datetime import datetime
from typing import NamedTuple

from bson import ObjectId

from desk.agent.core.store.keep import KEEP_TRANSCRIPT
from desk.schema import now

WINDOW = 50  # the newest messages a turn starts from, of any role (as agent_messages.session_messages returns them)
SESSIONS = 256  # conversations kept; the least recently used go first


class Message(NamedTuple):
    role: str
    content: str | None  # tool results are kept as None: the prompt never shows them
    at: datetime  # when it was stored
    chars: int  # its length in the prompt's JSON, `{"role": ..., "content": ...}` (0 when not shown)


class Peeked(NamedTuple):
    mark: ObjectId  # the id of the window's last message as stored (see copilot_sessions.claim_session)
    window: list[Message]


class Histories:
    def __init__(self, size: int = SESSIONS) -> None:
        self._size = size
        self._kept: OrderedDict[ObjectId, tuple[ObjectId, tuple[Message, ...]]] = OrderedDict()

    def peek(self, session_id: ObjectId) -> Peeked | None:
        """The window kept for a session and the mark it ends at, before a claim says whether it is current."""
        found = self._kept.get(session_id)
        if found is None:
            return None
        # SEC-12: a message past the transcript's retention is gone from the database, and from here
        oldest = now() - KEEP_TRANSCRIPT
        return Peeked(found[0], [message for message in found[1] if message[2] > oldest])

    def current(self, session: dict) -> list[Message] | None:
        """The window of a session as its claim returned it, or None when only the database knows it."""
        return self.confirmed(session, self.peek(session["_id"]))

    def confirmed(self, session: dict, peeked: Peeked | None) -> list[Message] | None:
        """`current`, from what `peek` found a moment before (while the session's claim was at the database).

        A window is only ever kept under the mark of its own last message, so the one peeked under the
        mark the claim returned is that window, whatever was kept since.
        """
        if "historyMark" not in session:  # a session from before marks were kept
            return None
        if session["historyMark"] is None:  # nothing said yet
            return []
        if peeked is None or peeked.mark != session["historyMark"]:
            return None
        if session["_id"] in self._kept:
            self._kept.move_to_end(session["_id"])
        return peeked.window

    def put(self, session_id: ObjectId, mark: ObjectId, messages: list[Message]) -> None:
        self._kept[session_id] = (mark, tuple(messages[-WINDOW:]))
        self._kept.move_to_end(session_id)
        while len(self._kept) > self._size:
            self._kept.popitem(last=False)

    def drop(self, session_id: ObjectId) -> None:
        self._kept.pop(session_id, None)


HISTORIES = Histories()


def kept(role: str, content: str | None, at: datetime | None = None) -> Message:
    """A message as the window keeps it; sized once here, since the conversation is sized before every turn."""
    shown = content if role in ("user", "assistant") else None
    return Message(role, shown, at or now(), chars(role, shown) if shown else 0)


def chars(role: str, content: str) -> int:
    """How long `{"role": role, "content": content}` is in a prompt's JSON (as `json.dumps` writes it)."""
    return len(json.dumps({"role": role, "content": content}))
