"""The copilot routes' contract: a login everywhere, the documented error envelope, the event names."""

import json

from desk.agent.core.events import EVENT_KINDS, RunEvent
from desk.errors import ErrorCode
from tests.agent.api_helpers import AI, refused


async def test_ai_routes_need_a_login(provider, anonymous):
    for method, path in [
        ("POST", f"{AI}/sessions"),
        ("GET", f"{AI}/sessions"),
        ("POST", f"{AI}/sessions/{'a' * 24}/messages"),
        ("POST", f"{AI}/tool-calls/{'a' * 24}/decide"),
        ("GET", f"{AI}/runs"),
        ("GET", f"{AI}/runs/{'a' * 24}"),
    ]:
        body = {"content": "hi"} if path.endswith("messages") else {"approve": True}
        response = await anonymous.request(method, path, json=body if method == "POST" else None)
        refused(response, 401, ErrorCode.UNAUTHORIZED)


EXPECTED_ERRORS = {  # route -> statuses it must document (besides 400 validation, 401 and 403)
    ("post", f"{AI}/sessions"): {409},
    ("get", f"{AI}/sessions"): set(),
    ("post", f"{AI}/sessions/{{session_id}}/messages"): {404, 409, 429},
    ("post", f"{AI}/tool-calls/{{tool_call_id}}/decide"): {404, 409, 410},
    ("get", f"{AI}/runs"): set(),
    ("get", f"{AI}/runs/{{run_id}}"): {404},
}


async def test_every_ai_route_documents_its_error_envelope(app, anonymous):
    spec = (await anonymous.get("/openapi.json")).json()

    routes = {
        (method, path): operation
        for path, item in spec["paths"].items()
        if path.startswith(AI)
        for method, operation in item.items()
    }
    assert set(routes) == set(EXPECTED_ERRORS)
    for route, operation in routes.items():
        # 422 is FastAPI's own entry; the desk answers validation with 400 (reported, not asserted here)
        documented = {int(s) for s in operation["responses"] if s.isdigit() and int(s) >= 400 and s != "422"}
        assert documented >= {400, 401, 403} | EXPECTED_ERRORS[route], (route, documented)
        for status in documented:
            schema = operation["responses"][str(status)]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorEnvelope"}, (route, status)
    messages = routes[("post", f"{AI}/sessions/{{session_id}}/messages")]
    assert "text/event-stream" in messages["responses"]["200"]["content"]
    described = " ".join(r.get("description", "") for r in messages["responses"].values())
    for code in ("AI_APPROVAL_PENDING", "AI_MESSAGE_DUPLICATE", "AI_BUDGET_EXCEEDED", "RATE_LIMITED"):
        assert code in described
    envelope = spec["components"]["schemas"]["ErrorEnvelope"]
    assert envelope["required"] == ["error"]


async def test_ai_routes_are_json_everywhere_on_errors(provider, client_for, make_user):
    """Unknown sub-paths and wrong methods under /api/v1/ai answer in the envelope too."""
    client = await client_for(await make_user("user"))
    refused(await client.get(f"{AI}/nothing-here"), 404, ErrorCode.NOT_FOUND)
    wrong_method = await client.delete(f"{AI}/sessions")
    refused(wrong_method, 405, ErrorCode.METHOD_NOT_ALLOWED)
    assert wrong_method.headers["Allow"] == "GET, HEAD, POST"
    refused(
        await client.post(f"{AI}/tool-calls/{'a' * 24}/decide", json={"approve": "yes"}),
        400,
        ErrorCode.VALIDATION_ERROR,
    )


def test_event_kinds_match_the_union():
    """The closed set the route checks against is exactly the events the runtime can yield."""
    names = {member.model_fields["kind"].default for member in RunEvent.__origin__.__args__}
    assert names == set(EVENT_KINDS) and len(EVENT_KINDS) == 8
    assert json.dumps(sorted(names))  # every name is plain ASCII, no separators
    assert all(name.isidentifier() for name in names)
