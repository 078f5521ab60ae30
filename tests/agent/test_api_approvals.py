"""Deciding a staged write over HTTP, with a cookie or a bearer token, while the stream waits (live server)."""

import json

import httpx
from bson import ObjectId
from httpx_sse import aconnect_sse

from desk.agent.core.events import RunEvent
from desk.auth import service as auth_service
from desk.errors import ErrorCode
from desk.http import CSRF_HEADER
from tests.agent.api_helpers import (
    AI,
    next_of,
    open_session,
    refused,
    sam_in_a_session,
    staged_update,
    waiting_for_approval,
)
from tests.helpers import actor


async def test_decide_over_http(provider, fake_provider, live_client_for, make_user, make_order, db, live):
    sam, eve = await make_user("user"), await make_user("user")
    order = await make_order(sam, "Leaking tap")
    client, eve_client = await live_client_for(sam), await live_client_for(eve)
    session_id = await open_session(client)

    async with waiting_for_approval(client, session_id, fake_provider, order.id) as (events, seen, staged):
        decide_url = f"{AI}/tool-calls/{staged.tool_call_id}/decide"

        refused(await eve_client.post(decide_url, json={"approve": True}), 404, ErrorCode.NOT_FOUND)
        no_csrf = await client.post(decide_url, json={"approve": True}, headers={CSRF_HEADER: ""})
        refused(no_csrf, 403, ErrorCode.FORBIDDEN)
        still = await db["agent_tool_calls"].find_one({"_id": ObjectId(staged.tool_call_id)})
        assert still["approval"]["status"] == "pending"

        decided = await client.post(decide_url, json={"approve": True})
        done = await next_of(events, "message_done", seen)

    assert decided.status_code == 200
    body = decided.json()
    assert body["id"] == staged.tool_call_id and body["approval"]["status"] == "approved"
    assert body["tool"] == "update_work_order" and body["args"] == {"id": order.id, "priority": "urgent"}
    assert done.status == "complete"
    assert [e.outcome for e in seen if e.kind == "tool_result"][-1] == "executed"
    stored = await db["work_orders"].find_one({})
    assert stored["priority"] == "urgent" and stored["version"] == 2
    again = await client.post(decide_url, json={"approve": True})  # a retried decide is harmless...
    assert again.status_code in (200, 410)
    assert (await db["work_orders"].find_one({}))["version"] == 2  # ...and never executes twice
    detail = (await client.get(f"{AI}/runs/{done.run_id}")).json()
    assert detail["run"]["finishedAt"] is not None and detail["run"]["errorCode"] is None
    assert detail["run"]["agentName"] == "copilot"
    write = detail["toolCalls"][-1]  # the audit trail of the write: what was approved, on what, and what came of it
    assert write["outcome"] == "executed" and write["preImage"]["priority"] == "medium"
    assert write["stagedVersion"] == 1 and write["executedVersion"] == 2
    assert write["result"]["updated"]["priority"] == "urgent" and isinstance(write["latencyMs"], int)
    assert write["approval"]["decidedAt"] is not None and write["approval"]["reason"] is None


async def test_a_rejection_over_http_changes_nothing_and_tells_the_assistant_why(
    provider, fake_provider, live_client_for, make_user, make_order, db
):
    sam, client, session_id = await sam_in_a_session(live_client_for, make_user)
    order = await make_order(sam, "Leaking tap")

    async with waiting_for_approval(client, session_id, fake_provider, order.id) as (events, seen, staged):
        decide_url = f"{AI}/tool-calls/{staged.tool_call_id}/decide"

        no_choice = await client.post(decide_url, json={"reason": "hmm"})  # approving is never the default
        too_long = await client.post(decide_url, json={"approve": False, "reason": "x" * 301})
        pending = await db["agent_tool_calls"].find_one({"_id": ObjectId(staged.tool_call_id)})
        rejected = await client.post(decide_url, json={"approve": False, "reason": "  not today  "})
        done = await next_of(events, "message_done", seen)

    refused(no_choice, 400, ErrorCode.VALIDATION_ERROR)
    refused(too_long, 400, ErrorCode.VALIDATION_ERROR)
    assert pending["approval"]["status"] == "pending"
    assert rejected.status_code == 200, rejected.text
    assert rejected.json()["approval"]["status"] == "rejected" and rejected.json()["approval"]["reason"] == "not today"
    assert done.status == "complete"
    assert [e.outcome for e in seen if e.kind == "tool_result"][-1] == "rejected"
    stored = await db["work_orders"].find_one({})
    assert stored["priority"] == "medium" and stored["version"] == 1
    told = fake_provider.requests[-1]["messages"][-1]  # what the model read back as the tool's result
    assert told["role"] == "tool" and json.loads(told["content"]) == {"rejected": True, "reason": "not today"}


async def test_bearer_token_works_for_the_whole_flow_without_csrf(
    provider, fake_provider, live, make_user, make_order, db
):
    sam = await make_user("user")
    order = await make_order(sam, "Leaking tap")
    token = await auth_service.create_token(db=db, actor=actor(sam), name="script")
    fake_provider.script(*staged_update(order.id, "low"))

    async with httpx.AsyncClient(base_url=live, headers={"Authorization": f"Bearer {token.secret}"}) as client:
        assert CSRF_HEADER not in client.headers and not client.cookies
        session_id = await open_session(client)
        url = f"{AI}/sessions/{session_id}/messages"
        async with aconnect_sse(client, "POST", url, json={"content": "lower it"}) as source:
            seen: list[RunEvent] = []
            events = source.aiter_sse()
            staged = await next_of(events, "tool_approval_required", seen)
            decided = await client.post(f"{AI}/tool-calls/{staged.tool_call_id}/decide", json={"approve": True})
            done = await next_of(events, "message_done", seen)
        runs = (await client.get(f"{AI}/runs")).json()
        detail = (await client.get(f"{AI}/runs/{done.run_id}")).json()

    assert decided.status_code == 200 and done.status == "complete"
    assert (await db["work_orders"].find_one({}))["priority"] == "low"
    assert [r["id"] for r in runs] == [done.run_id]
    assert detail["run"]["status"] == "complete"
    assert [c["outcome"] for c in detail["toolCalls"]] == ["ok", "executed"]
