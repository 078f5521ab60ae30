"""Copilot floor: what this stack adds to the first token with no desk on it (for reading bench/copilot.py).

A bare ASGI app under uvicorn, in its own process, does for each turn only what any service in
front of the model must do on this stack (pymongo's async client, the embedded database, httpx):

- one aggregate to find the person behind the bearer token;
- three commands side by side: claim the conversation, count the start, read the shared spend;
- one streamed httpx call to the same fake provider, with the desk's system prompt and tools;
- the first token out as an SSE frame.

No framework, no validation, no models, no checks on what it reads. It runs twice: once doing
only that and letting go of the conversation at the end ("checks and call"), once also storing
what the desk stores for a turn ("and the turn's writes": the run and the person's message after
the first token, then the answer, the ledger's three `$inc`s and the run's end). The clients, the fake and the
pairing of each turn with a direct call are bench/copilot.py's, so the figures compare. Run by
hand, never in CI:

    .venv/bin/python -m bench.copilot_floor [--turns 200] [--concurrent 10] [--rounds 20] [--repeat 1]
"""

import asyncio
import functools
import json
import os
import tempfile
from pathlib import Path

import httpx
from bson import ObjectId
from pymongo import AsyncMongoClient, MongoClient, ReturnDocument, UpdateOne

from bench.copilot import Stream, arguments, compare, running, serve, serve_fake
from bench.harness import free_port
from desk.actors import Actor, Role
from desk.agent.prompt import SYSTEM_PROMPT
from desk.agent.tools import REGISTRY
from desk.db.embedded import EmbeddedMongo
from desk.schema import now

TOOLS = [tool.schema() for tool in REGISTRY.allowed("copilot", Actor(id=str(ObjectId()), role=Role.USER))]


class Floor:
    """The app's connections, opened at start-up (lifespan) in the server's event loop."""

    def __init__(self) -> None:
        self.db = AsyncMongoClient(os.environ["MONGODB_URI"])["floor"]
        self.http = httpx.AsyncClient(base_url=os.environ["FLOOR_FAKE_URL"], timeout=10, follow_redirects=False)
        self.writes = os.environ["FLOOR_WRITES"] == "1"

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
        body = {
            "model": "m",
            "stream": True,
            "max_tokens": 1024,
            "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": content}],
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
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    assert _floor is not None
    await _floor.turn(int(scope["path"].rsplit("/", 1)[1]), json.loads(body)["content"], send)


async def ttft_floor(stream: Stream, person: int) -> float:
    return await stream.first(f"/turns/{person}", {"content": "Anything open?"}, b"event: token")


async def measure(base: str, fake_url: str, *, concurrent: int, pids: dict[str, int], **runs: int) -> None:
    floors = [Stream(base) for _ in range(concurrent)]
    fakes = [Stream(fake_url) for _ in range(concurrent)]
    people = [functools.partial(ttft_floor, stream, person) for person, stream in enumerate(floors)]
    await compare(fakes, people, pids=pids, **runs)
    for stream in floors + fakes:
        await stream.close()


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    fake_port = free_port()
    fake_url = f"http://127.0.0.1:{fake_port}/v1"
    with (
        tempfile.TemporaryDirectory(prefix="desk-copilot-floor-") as tmp,
        (database := EmbeddedMongo(Path(tmp) / "mongo")) as uri,
        running(serve_fake(fake_port)) as fake,
    ):
        with MongoClient(uri) as client:
            seed = client["floor"]
            for person in range(args.concurrent):
                seed["users"].insert_one({"_id": person, "name": f"Person {person}", "active": True})
                seed["tokens"].insert_one({"_id": f"token{person}", "userId": person})
                seed["sessions"].insert_one({"_id": f"session{person}", "runningRunId": None})
        for writes, title in (("0", "checks and call"), ("1", "and the turn's writes")):
            port = free_port()
            env = os.environ | {"MONGODB_URI": uri, "FLOOR_FAKE_URL": fake_url, "FLOOR_WRITES": writes}
            with running(serve("bench.copilot_floor:floor_app", port, env)) as server:
                print(f"\n== floor: {title} (its figures in the 'desk' columns)")
                pids = {"floor": server.pid, "database": database.pid, "fake": fake.pid, "bench": os.getpid()}
                asyncio.run(
                    measure(
                        f"http://127.0.0.1:{port}",
                        fake_url,
                        concurrent=args.concurrent,
                        pids=pids,
                        turns=args.turns,
                        rounds=args.rounds,
                        repeat=args.repeat,
                    )
                )


if __name__ == "__main__":
    main()
