"""The copilot's floor as an app: what any service in front of the model does for a turn here, and no more.

A bare ASGI app (no framework, no validation, no models, no checks on what it reads), served under
uvicorn in its own process (`bench.harness.serve`), for each turn POST /turns/{person}:

- one aggregate to find the person behind the bearer token;
- three commands side by side: claim the conversation, count the start, read the shared spend;
- one streamed httpx call to the fake provider, with the desk's system prompt and tools and the same
  conversation the desk sends: the person's newest 50 messages, kept in memory as the desk keeps them;
- the first token out as an SSE frame;
- with FLOOR_WRITES=1, also what the desk stores for a turn: the run and the person's message after
  the first token, then the answer, the ledger's three `$inc`s and the run's end.

bench/copilot_floor.py measures it alone; bench/copilot.py runs it turn by turn beside the desk.
"""

import asyncio
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from bson import ObjectId
from pymongo import AsyncMongoClient, MongoClient, ReturnDocument, UpdateOne

from bench.harness import free_port, read_body, running, serve
from desk.actors import Actor, Role
from desk.agent.copilot.prompt import SYSTEM_PROMPT
from desk.agent.copilot.toolset import REGISTRY
from desk.agent.core.history import WINDOW
from desk.schema import now

TOOLS = [tool.schema() for tool in REGISTRY.allowed("copilot", Actor(id=str(ObjectId()), role=Role.USER))]


class Floor:
    """The app's connections, opened at start-up (lifespan) in the server's event loop."""

    def __init__(self) -> None:
        self.db = AsyncMongoClient(os.environ["MONGODB_URI"])["floor"]
        self.http = httpx.AsyncClient(base_url=os.environ["FLOOR_FAKE_URL"], timeout=10, follow_redirects=False)
        self.writes = os.environ["FLOOR_WRITES"] == "1"
        self.conversations: dict[int, list[dict]] = {}

    async def turn(self, person: int, content: str, send) -> None:
        db = self.db
        await (
            await db["tokens"].aggregate(
                [
                    {"$match": {"_id": f"token{person}"}},
                    {"$limit": 1},
                    {"$lookup": {"from": "users", "localField": "userId", "foreignField": "_id", "as": "user"}},
                ]
            )
        ).to_list()
        run_id, moment = ObjectId(), now()
        await asyncio.gather(
            db["sessions"].find_one_and_update(
                {"_id": f"session{person}", "runningRunId": None}, {"$set": {"runningRunId": run_id, "at": moment}}
            ),
            db["spend"].find_one_and_update(
                {"_id": f"user{person}"}, {"$inc": {"starts": 1}}, upsert=True, return_document=ReturnDocument.AFTER
            ),
            db["spend"].find({"_id": {"$in": ["agent", "global"]}}).to_list(),
        )
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        conversation = self.conversations.setdefault(person, [])
        conversation.append({"role": "user", "content": content})
        del conversation[:-WINDOW]
        body = {
            "model": "m",
            "stream": True,
            "max_tokens": 1024,
            "messages": [{"role": "system", "content": SYSTEM_PROMPT}, *conversation],
            "tools": TOOLS,
        }
        records: asyncio.Task | None = None
        answer = ""
        async with self.http.stream("POST", "/chat/completions", json=body) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data: {"):
                    continue
                for choice in json.loads(line[6:]).get("choices", []):
                    if text := choice.get("delta", {}).get("content"):
                        answer += text
                        frame = f"event: token\ndata: {json.dumps({'text': text})}\n\n"
                        await send({"type": "http.response.body", "body": frame.encode(), "more_body": True})
                        if records is None and self.writes:
                            records = asyncio.create_task(self.record(run_id, person, content))
        conversation.append({"role": "assistant", "content": answer})
        if records is not None:
            await records
            await db["messages"].insert_one({"runId": run_id, "role": "assistant", "content": answer})
            ledger = [
                UpdateOne({"_id": key}, {"$inc": {"usd": 0.001}}, upsert=True)
                for key in (f"user{person}", "agent", "global")
            ]
            await db["spend"].bulk_write(ledger, ordered=False)
            await db["runs"].update_one({"_id": run_id}, {"$set": {"status": "complete", "endedAt": now()}})
        await db["sessions"].update_one({"_id": f"session{person}"}, {"$set": {"runningRunId": None}})
        await send({"type": "http.response.body", "body": b"event: message_done\ndata: {}\n\n", "more_body": False})

    async def record(self, run_id: ObjectId, person: int, content: str) -> None:
        await self.db["runs"].insert_one({"_id": run_id, "userId": person, "status": "running", "startedAt": now()})
        await self.db["messages"].insert_one({"runId": run_id, "role": "user", "content": content})


_floor: Floor | None = None


async def floor_app(scope, receive, send) -> None:
    """POST /turns/{person} with {"content": ...}: one turn, as the module's docstring says."""
    global _floor  # noqa: PLW0603 - one per server process, made in its own event loop
    if scope["type"] == "lifespan":
        while (await receive())["type"] == "lifespan.startup":
            _floor = Floor()
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = await read_body(receive)
    assert _floor is not None
    await _floor.turn(int(scope["path"].rsplit("/", 1)[1]), json.loads(body)["content"], send)


def seed(uri: str, people: int) -> None:
    """The floor's people, their tokens and conversations (person n: token{n}, session{n})."""
    with MongoClient(uri) as client:
        floor = client["floor"]
        floor.drop_collection("users")
        floor.drop_collection("tokens")
        floor.drop_collection("sessions")
        for person in range(people):
            floor["users"].insert_one({"_id": person, "name": f"Person {person}", "active": True})
            floor["tokens"].insert_one({"_id": f"token{person}", "userId": person})
            floor["sessions"].insert_one({"_id": f"session{person}", "runningRunId": None})


@contextmanager
def floor_running(uri: str, fake_url: str, *, writes: bool) -> Iterator[tuple[str, int]]:
    """The floor app in its own process on the database at `uri` (seeded first): its base URL and pid."""
    port = free_port()
    env = os.environ | {"MONGODB_URI": uri, "FLOOR_FAKE_URL": fake_url, "FLOOR_WRITES": "1" if writes else "0"}
    with running(serve("bench.floor_app:floor_app", port, env)) as server:
        yield f"http://127.0.0.1:{port}", server.pid
