"""The copilot's tools: what they may show (SEC-10 deny-list, truncation), what each returns and does, who is
offered them, their schemas, and drift guards on the system prompt and the registry.

Tool output is checked where it matters: in the `tool` messages the (fake) model receives, in the stored
tool calls and transcript, and in the events the person's client gets.
"""

import contextlib
import difflib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from bson import ObjectId

from desk.agent.copilot import approvals
from desk.agent.copilot.prompt import SYSTEM_PROMPT
from desk.agent.copilot.toolset import REGISTRY as COPILOT
from desk.agent.core.tools import MAX_CHARS, MAX_ITEMS
from desk.agent.triage.tool import REGISTRY as TRIAGE_ONLY
from desk.attachments import service as attachments
from desk.auth import service as auth_service
from desk.errors import Unauthorized
from desk.work_orders import service as work_orders
from desk.work_orders.models import WorkOrderUpdate
from tests.fake_provider import Turn
from tests.helpers import actor, lock_out

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE_HINT = "UPDATE_SNAPSHOTS=1 .venv/bin/pytest -p no:cacheprovider tests/agent/test_tools.py -k snapshot"

READ_ARGS: dict[str, dict[str, Any]] = {  # how the walk calls each read tool
    "list_my_work_orders": {},
    "search_my_work_orders": {"q": "tap"},
    "get_profile": {},
    "admin_list_work_orders": {},
    "list_work_orders": {},
    "admin_list_users": {},
    "admin_metrics": {},
}
WRITES = ("create_work_order", "update_work_order", "delete_work_order")
TRIAGE = ("triage_propose",)  # the System Actor's alone (tests/triage/test_gate.py); its result is its arguments
OFFERED = {
    "viewer": {"list_my_work_orders", "search_my_work_orders", "get_profile", "list_work_orders"},
    "user": {"list_my_work_orders", "search_my_work_orders", "get_profile", *WRITES},
    "admin": {*READ_ARGS, *WRITES} - {"list_work_orders"},
}
DENIED_KEYS = {"passwordhash", "failedlogincount", "lockeduntil"}  # and any key ending in "hash"

ALL_TOOLS = {**COPILOT.tools, **TRIAGE_ONLY.tools}  # each agent's registry, in the order they are offered


# --- SEC-10: nothing secret ever reaches a tool result --------------------------------------------


def leaks(value: Any, secrets: set[str], path: str = "$") -> list[str]:
    """Every place in `value` (walked to any depth, JSON text included) that holds a denied key or a secret."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            if str(key).lower() in DENIED_KEYS or str(key).lower().endswith("hash"):
                found.append(f"{path}.{key}")
            found += leaks(item, secrets, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found += leaks(item, secrets, f"{path}[{index}]")
    elif isinstance(value, str):
        if "$argon2" in value:
            found.append(f"{path} (an argon2 hash)")
        found += [f"{path} (a stored secret)" for secret in secrets if secret in value]
        if value.startswith(("{", "[")):
            with contextlib.suppress(ValueError):  # text that only looks like JSON was walked as text above
                found += leaks(json.loads(value), secrets, f"{path}<json>")
    return found


@pytest.fixture
async def desk_with_secrets(db, make_user, make_order, change_user):
    """An admin, a user and a viewer with orders, sessions, API tokens, failed logins and a lockout."""
    people = {role: await make_user(role) for role in ("admin", "user")}
    people["viewer"] = await make_user("user")  # a viewer once they hold their order (below)
    locked, wobbly = await make_user("user"), await make_user("user")
    await lock_out(db, locked["email"], wrong="wrong password!")
    for _ in range(2):
        with pytest.raises(Unauthorized):
            await auth_service.login(db=db, email=wobbly["email"], password="wrong password!", ip="10.1.1.1")
    plain = set()
    for person in (*people.values(), locked):
        plain.add(await auth_service.open_session(db=db, user_id=ObjectId(person["id"])))
        plain.add((await auth_service.create_token(db=db, actor=actor(person), name="cli")).secret)
    for role in ("admin", "user"):
        await make_order(people[role], f"Leaking tap for {role}", description="Drips all night.")
    await make_order(people["admin"], "Broken tap for the viewer", ownerId=people["viewer"]["id"])
    people["viewer"] = await change_user(people["viewer"], role="viewer")
    # the database really holds what must never show
    users = await db["users"].find({}).to_list()
    assert all(u["passwordHash"].startswith("$argon2") for u in users)
    assert any(u.get("lockedUntil") for u in users) and any(u.get("failedLoginCount") for u in users)
    stored = {u["passwordHash"] for u in users}
    stored |= {s["_id"] for s in await db["sessions"].find({}).to_list()}
    stored |= {t["hash"] for t in await db["api_tokens"].find({}).to_list()}
    return people, stored | plain


def tool_messages(requests: list[dict]) -> list[dict]:
    """The tool results as the model received them (each content parsed from its JSON text)."""
    results = []
    for request in requests:  # a request repeats the run's earlier messages: take those after the last step
        messages = request["messages"]
        last_step = max(i for i, m in enumerate(messages) if m["role"] in ("assistant", "user"))
        results += [json.loads(m["content"]) for m in messages[last_step + 1 :] if m["role"] == "tool"]
    return results


async def everything_recorded(db) -> list[Any]:
    calls = await db["agent_tool_calls"].find({}, {"_id": 0, "runId": 0, "userId": 0}).to_list()
    messages = await db["agent_messages"].find({}, {"_id": 0, "runId": 0, "sessionId": 0}).to_list()
    return [{k: v for k, v in doc.items() if isinstance(v, str | dict | list)} for doc in calls + messages]


@pytest.mark.parametrize("role", ["admin", "user", "viewer"])
async def test_no_read_tool_result_holds_a_secret(role, desk_with_secrets, copilot, fake_provider, db):
    people, secrets = desk_with_secrets
    person = people[role]
    allowed = [t.name for t in ALL_TOOLS.values() if not t.writes and role in t.roles]
    fake_provider.script(
        Turn.tool_calls(*((name, READ_ARGS[name], f"call_{name}") for name in allowed)), Turn.text("Done.")
    )

    events = await copilot(person, "tell me everything")

    outcomes = {e.tool: e.outcome for e in events if e.kind == "tool_result"}
    assert outcomes == dict.fromkeys(allowed, "ok")
    results = tool_messages(fake_provider.requests)
    assert len(results) == len(allowed) and all(results)
    shown = [results, await everything_recorded(db), [e.model_dump() for e in events]]
    assert leaks(shown, secrets) == []


@pytest.mark.parametrize("role", ["admin", "user"])
async def test_no_write_tool_result_holds_a_secret(role, desk_with_secrets, copilot, approve, fake_provider, db):
    people, secrets = desk_with_secrets
    person = people[role]
    mine = await db["work_orders"].find_one({"ownerId": ObjectId(person["id"])})
    target = str(mine["_id"])
    fake_provider.script(
        Turn.tool_calls(("list_my_work_orders", {})),
        Turn.tool_calls(("create_work_order", {"title": "New filter", "description": "Quarterly", "priority": "low"})),
        Turn.tool_calls(("update_work_order", {"id": target, "priority": "high"})),
        Turn.tool_calls(("delete_work_order", {"id": target})),
        Turn.text("All done."),
    )

    events = await copilot(person, "do the chores", decide=approve(person))

    outcomes = [(e.tool, e.outcome) for e in events if e.kind == "tool_result"]
    assert outcomes == [("list_my_work_orders", "ok"), *((w, "executed") for w in WRITES)]
    results = tool_messages(fake_provider.requests)
    assert [next(iter(r)) for r in results[1:]] == ["created", "updated", "deleted"]
    executed = await db["agent_tool_calls"].find({"outcome": "executed"}).to_list()
    assert [c["tool"] for c in executed] == list(WRITES) and all(c["result"] for c in executed)
    shown = [results, await everything_recorded(db), [e.model_dump() for e in events]]
    assert leaks(shown, secrets) == []


def test_the_walk_covers_every_registered_tool():
    """A new tool must join the deny-list walk (and the allowlists below) before it ships."""
    assert set(ALL_TOOLS) == set(READ_ARGS) | set(WRITES) | set(TRIAGE)
    assert {name for name, tool in ALL_TOOLS.items() if tool.writes} == set(WRITES)


def test_the_deny_list_walk_finds_what_it_looks_for():
    planted = {"a": [{"b": '{"user": {"passwordHash": "x"}}'}], "lockedUntil": None, "c": "$argon2id$v=19$..."}
    found = leaks(planted, {"s3cr3t"}) + leaks({"deep": {"tokenHash": 1, "note": "has s3cr3t inside"}}, {"s3cr3t"})
    assert found == [
        "$.a[0].b<json>.user.passwordHash",
        "$.lockedUntil",
        "$.c (an argon2 hash)",
        "$.deep.tokenHash",
        "$.deep.note (a stored secret)",
    ]


# --- truncation (spec §4.7) -------------------------------------------------------------------------


async def test_list_and_search_results_are_capped_at_10_items_and_4000_chars(
    copilot, fake_provider, make_user, make_order
):
    sam, boss = await make_user("user"), await make_user("admin")
    for n in range(3):  # older, and no tap: the list and the search give different answers (both shown)
        await make_order(sam, f"Squeaky door {n}")
    for n in range(24):
        await make_order(sam, f"Leaking tap {n}")
    long_text = ("The tap leaks into the cupboard. " * 200)[:4999] + "!"
    await make_order(sam, "Leaking tap with a long story", description=long_text)  # the newest: shown first
    fake_provider.script(
        Turn.tool_calls(("list_my_work_orders", {}), ("search_my_work_orders", {"q": "tap"})),
        Turn.text("Lots."),
        Turn.tool_calls(("admin_list_work_orders", {"q": "tap"})),
        Turn.text("Lots."),
    )

    await copilot(sam, "what do I have?")
    await copilot(boss, "what is on the desk?")

    results = tool_messages(fake_provider.requests)
    assert len(results) == 3
    for result in results:
        assert result["shown"] == MAX_ITEMS == len(result["workOrders"]) == 10
        assert result["total"] >= 25 or result.get("totalExact") is False
        longest = max(len(s) for s in _strings(result))
        assert longest <= MAX_CHARS == 4000
        first = result["workOrders"][0]
        assert first["title"] == "Leaking tap with a long story"
        assert first["description"].startswith(long_text[:3000]) and len(first["description"]) == MAX_CHARS
    tool_text = [m["content"] for r in fake_provider.requests for m in r["messages"] if m["role"] == "tool"]
    assert all(len(text) < MAX_ITEMS * (MAX_CHARS + 1000) for text in tool_text)


async def test_a_text_of_exactly_4000_chars_is_shown_whole_and_one_char_more_is_clipped(
    copilot, fake_provider, make_user, make_order
):
    sam = await make_user("user")
    at_cap = ("The tap leaks into the cupboard. " * 200)[: MAX_CHARS - 1] + "!"  # no end space: it is stripped
    over_cap = at_cap + "!"
    await make_order(sam, "Leaking tap, at the cap", description=at_cap)
    await make_order(sam, "Leaking tap, one over", description=over_cap)
    fake_provider.script(Turn.tool_calls(("list_my_work_orders", {})), Turn.text("Two."))

    await copilot(sam, "what do I have?")

    (result,) = tool_messages(fake_provider.requests)
    shown = {order["title"]: order["description"] for order in result["workOrders"]}
    assert shown["Leaking tap, at the cap"] == at_cap
    assert shown["Leaking tap, one over"] == over_cap[: MAX_CHARS - 1] + "…"  # still MAX_CHARS long, marked


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return [value] if isinstance(value, str) else []


# --- what each tool shows and does -----------------------------------------------------------------


async def test_a_work_order_is_shown_with_its_fields_and_never_its_version_or_owner(
    copilot, fake_provider, make_user, make_order
):
    sam = await make_user()
    tap = await make_order(sam, "Leaking tap", description="Under the sink", priority="high")
    fake_provider.script(Turn.tool_calls(("list_my_work_orders", {})), Turn.text("One."))

    await copilot(sam, "what do I have?")

    (result,) = tool_messages(fake_provider.requests)
    assert result["workOrders"] == [
        {
            "id": tap.id,
            "title": tap.title,
            "description": tap.description,
            "priority": tap.priority,
            "status": tap.status,
            "dueAt": None,
            "createdAt": tap.created_at.isoformat(),
            "updatedAt": tap.updated_at.isoformat(),
        }
    ]


async def test_the_my_tools_show_an_admin_only_their_own_orders(copilot, fake_provider, make_user, make_order):
    boss, sam = await make_user("admin"), await make_user("user")
    await make_order(boss, "Squeaky door in the office")
    await make_order(boss, "Leaking tap in the office")
    await make_order(sam, "Leaking tap at home")
    fake_provider.script(
        Turn.tool_calls(
            ("list_my_work_orders", {}), ("search_my_work_orders", {"q": "tap"}), ("admin_list_work_orders", {})
        ),
        Turn.text("One of them is yours."),
    )

    await copilot(boss, "which leaking taps are mine?")

    listed, found, everyone = tool_messages(fake_provider.requests)
    assert {o["title"] for o in listed["workOrders"]} == {"Leaking tap in the office", "Squeaky door in the office"}
    assert (found["total"], [o["title"] for o in found["workOrders"]]) == (1, ["Leaking tap in the office"])
    assert everyone["total"] == 3  # the desk-wide tool is where an admin sees the others


FILTERED = {  # (who asks, tool, arguments, the titles it must show)
    "my list by priority": ("user", "list_my_work_orders", {"priority": "high"}, {"Leaking tap", "Squeaky door"}),
    "my search by status": ("user", "search_my_work_orders", {"q": "tap", "status": "done"}, {"Leaking tap upstairs"}),
    "desk list by words": ("admin", "admin_list_work_orders", {"q": "door"}, {"Squeaky door"}),
    "desk list by status": ("admin", "admin_list_work_orders", {"status": "in_progress"}, {"Squeaky door"}),
    "desk list by priority": ("admin", "admin_list_work_orders", {"priority": "low"}, {"Leaking tap upstairs"}),
}


@pytest.mark.parametrize(("role", "tool", "args", "titles"), FILTERED.values(), ids=FILTERED.keys())
async def test_list_and_search_filters_narrow_what_is_shown(
    role, tool, args, titles, copilot, fake_provider, make_user, make_order, db
):
    sam, boss = await make_user("user"), await make_user("admin")
    await make_order(sam, "Leaking tap", priority="high")
    upstairs = await make_order(sam, "Leaking tap upstairs", priority="low")
    door = await make_order(sam, "Squeaky door", priority="high")
    for order, status in ((upstairs, "done"), (door, "in_progress")):
        await work_orders.update(
            db=db, actor=actor(sam), order_id=order.id, data=WorkOrderUpdate(version=1, status=status)
        )
    fake_provider.script(Turn.tool_calls((tool, args)), Turn.text("Here they are."))

    await copilot(sam if role == "user" else boss, "which ones?")

    (result,) = tool_messages(fake_provider.requests)
    assert {o["title"] for o in result["workOrders"]} == titles
    assert result["total"] == result["shown"] == len(titles)


async def test_an_order_the_copilot_creates_keeps_its_priority_and_run_and_can_be_changed_in_the_same_run(
    start, fake_provider, make_user, db
):
    sam = await make_user()
    fake_provider.script(Turn.tool_calls(("create_work_order", {"title": "Replace hall bulb", "priority": "urgent"})))
    events = []

    async for event in (await start(sam, "Add an urgent order for the hall bulb and start on it")).events():
        events.append(event)
        if event.kind == "tool_approval_required":
            await approvals.decide(db=db, actor=actor(sam), tool_call_id=event.tool_call_id, approve=True, reason=None)
        if event.kind == "tool_result" and event.tool == "create_work_order":  # the model goes on with the new id
            (made,) = await db["work_orders"].find().to_list()
            fake_provider.script(
                Turn.tool_calls(("update_work_order", {"id": str(made["_id"]), "status": "in_progress"})),
                Turn.text("Added it and started on it."),
            )

    outcomes = [(e.tool, e.outcome) for e in events if e.kind == "tool_result"]
    assert outcomes == [("create_work_order", "executed"), ("update_work_order", "executed")]
    created, updated = tool_messages(fake_provider.requests)
    assert created["created"]["priority"] == "urgent"
    assert (updated["updated"]["priority"], updated["updated"]["status"]) == ("urgent", "in_progress")
    (stored,) = await db["work_orders"].find().to_list()
    assert (stored["title"], stored["priority"], stored["status"]) == ("Replace hall bulb", "urgent", "in_progress")
    timeline = await work_orders.activity(db=db, actor=actor(sam), order_id=str(stored["_id"]))
    assert sorted((a.action, a.run_id) for a in timeline) == [
        ("created", events[-1].run_id),
        ("updated", events[-1].run_id),
    ]


async def test_the_profile_shows_name_email_role_and_ai_setting_and_nothing_else(copilot, fake_provider, make_user):
    sam = await make_user(name="Sam Reyes")
    fake_provider.script(Turn.tool_calls(("get_profile", {})), Turn.text("You are Sam."))

    await copilot(sam, "who am I?")

    (profile,) = tool_messages(fake_provider.requests)
    assert profile == {key: sam[key] for key in ("name", "email", "role", "aiEnabled")}


async def test_the_people_tool_shows_the_first_ten_people_by_name_and_says_how_many(copilot, fake_provider, make_user):
    boss = await make_user("admin")
    others = [await make_user(role) for role in ("user", "viewer") * 5 + ("user",)]
    fake_provider.script(Turn.tool_calls(("admin_list_users", {})), Turn.text("Twelve people."))

    events = await copilot(boss, "who works here?")

    (result,) = tool_messages(fake_provider.requests)
    first = sorted([boss, *others], key=lambda u: (u["name"], u["id"]))[:MAX_ITEMS]  # as the Users page lists them
    shown = [{key: u[key] for key in ("name", "email", "role", "active", "aiEnabled")} for u in first]
    assert result == {"total": len(others) + 1, "shown": MAX_ITEMS, "users": shown}
    (said,) = [e.summary for e in events if e.kind == "tool_result"]
    assert said == f"Looked up {MAX_ITEMS} people"


async def test_a_summary_of_one_thing_looked_up_reads_right(copilot, fake_provider, make_user, make_order, db):
    boss = await make_user("admin")  # the only person on the desk
    await make_order(boss, "Leaking tap")
    door = await make_order(boss, "Squeaky door")
    await work_orders.update(db=db, actor=actor(boss), order_id=door.id, data=WorkOrderUpdate(version=1, status="done"))
    fake_provider.script(
        Turn.tool_calls(
            ("list_my_work_orders", {"status": "done"}),
            ("admin_list_work_orders", {"status": "pending"}),
            ("admin_list_users", {}),
        ),
        Turn.text("One of each."),
    )

    events = await copilot(boss, "what is there?")

    said = [e.summary for e in events if e.kind == "tool_result"]
    assert said == ["Looked up 1 of your work orders", "Looked up 1 work order on the desk", "Looked up 1 person"]


async def test_the_metrics_tool_shows_the_desks_figures_by_their_api_names(
    copilot, fake_provider, make_user, make_order, db
):
    boss = await make_user("admin")
    await make_order(boss, "Leaking tap", priority="high")
    door = await make_order(boss, "Squeaky door")
    await work_orders.update(db=db, actor=actor(boss), order_id=door.id, data=WorkOrderUpdate(version=1, status="done"))
    fake_provider.script(Turn.tool_calls(("admin_metrics", {})), Turn.text("Two orders."))

    await copilot(boss, "how is the desk doing?")

    (result,) = tool_messages(fake_provider.requests)
    assert set(result) == {"total", "byStatus", "byPriority", "perDay", "meanHoursToDone", "overdue"}
    assert result["overdue"] == 0  # one number: by owner they are ids the model never sees
    assert result["total"] == 2
    assert (result["byStatus"]["pending"], result["byStatus"]["done"]) == (1, 1)
    assert (result["byPriority"]["medium"], result["byPriority"]["high"]) == (1, 1)
    assert sum(d["opened"] for d in result["perDay"]) == 2 and sum(d["closed"] for d in result["perDay"]) == 1


# --- who is offered what ----------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["viewer", "user", "admin"])
async def test_each_role_is_offered_only_its_allowlist(role, copilot, fake_provider, make_user):
    person = await make_user(role)
    fake_provider.script(Turn.text("Hello."))

    await copilot(person, "hi")

    offered = {t["function"]["name"] for t in fake_provider.requests[0]["tools"]}
    assert offered == OFFERED[role]
    if role != "admin":
        assert not any(name.startswith("admin_") for name in offered)
    if role == "viewer":
        assert not offered & set(WRITES)


async def test_a_viewers_assistant_reads_every_order_and_changes_none(copilot, fake_provider, make_user, make_order):
    # found by a viewer: asked about the desk's orders, it looked only at theirs (a viewer owns none) and found none
    sam, vic = await make_user("user"), await make_user("viewer")
    await make_order(sam, "Leaking tap")
    await make_order(sam, "Broken blind")
    fake_provider.script(Turn.tool_calls(("list_work_orders", {"q": "tap"})), Turn.text("One: the leaking tap."))

    events = await copilot(vic, "Is anything about a tap open?")

    (result,) = tool_messages(fake_provider.requests)
    assert [order["title"] for order in result["workOrders"]] == ["Leaking tap"]
    offered = {t["function"]["name"] for t in fake_provider.requests[0]["tools"]}
    assert not offered & set(WRITES)  # COP-5: reading all, a viewer is still offered no write
    assert [e.outcome for e in events if e.kind == "tool_result"] == ["ok"]


def test_no_tool_schema_lets_the_model_name_a_version_or_an_owner():
    for tool in ALL_TOOLS.values():
        schema = tool.schema()
        names = _keys_and_names(schema)
        assert not {"version", "ownerid", "owner_id", "owner"} & {n.lower() for n in names}, tool.name
        assert schema["function"]["parameters"].get("additionalProperties") is False, tool.name


def _keys_and_names(value: Any) -> set[str]:
    """Every key of a JSON schema, and every name listed in `required`."""
    if isinstance(value, dict):
        names = set(value) | set(value.get("required", []) if isinstance(value.get("required"), list) else [])
        return names | {n for item in value.values() for n in _keys_and_names(item)}
    if isinstance(value, list):
        return {n for item in value for n in _keys_and_names(item)}
    return set()


# --- drift guards -------------------------------------------------------------------------------------


def check_snapshot(name: str, actual: str, *, directory: Path = SNAPSHOTS) -> None:
    """Compare `actual` with the stored snapshot; fail with a diff (never write) unless UPDATE_SNAPSHOTS=1."""
    path = directory / name
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        directory.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"No snapshot {path}. Review the current value, then create it with:\n  {UPDATE_HINT}")
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(expected.splitlines(True), actual.splitlines(True), f"snapshot/{name}", "now")
        )
        pytest.fail(
            f"{name} changed without its snapshot. The model sees this text: review the change (and rerun the "
            f"agent evals), then update the snapshot with:\n  {UPDATE_HINT}\n\n{diff}"
        )


def registry_snapshot() -> str:
    """The registry as the model and the gate see it: order, names, kinds, modes, roles, JSON schemas."""
    tools = [
        {"name": t.name, "kind": t.kind, "mode": t.mode, "roles": sorted(t.roles), "schema": t.schema()}
        for t in ALL_TOOLS.values()
    ]
    return json.dumps(tools, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_system_prompt_snapshot():
    check_snapshot("system_prompt.txt", SYSTEM_PROMPT)


def test_tool_registry_snapshot():
    check_snapshot("tool_registry.json", registry_snapshot())


def test_snapshot_guard_fails_on_drift_and_never_writes_unasked(tmp_path, monkeypatch):
    monkeypatch.delenv("UPDATE_SNAPSHOTS", raising=False)
    (tmp_path / "prompt.txt").write_text("You help people.\n", encoding="utf-8")

    with pytest.raises(pytest.fail.Exception, match="UPDATE_SNAPSHOTS=1") as drift:
        check_snapshot("prompt.txt", "You obey tool results.\n", directory=tmp_path)
    with pytest.raises(pytest.fail.Exception, match="UPDATE_SNAPSHOTS=1"):
        check_snapshot("missing.json", "{}", directory=tmp_path)

    assert "-You help people." in str(drift.value) and "+You obey tool results." in str(drift.value)
    assert (tmp_path / "prompt.txt").read_text(encoding="utf-8") == "You help people.\n"
    assert not (tmp_path / "missing.json").exists()
    monkeypatch.setenv("UPDATE_SNAPSHOTS", "1")
    check_snapshot("prompt.txt", "You obey tool results.\n", directory=tmp_path)
    assert (tmp_path / "prompt.txt").read_text(encoding="utf-8") == "You obey tool results.\n"


async def test_the_copilot_sees_the_names_and_sizes_of_an_orders_files_never_their_contents(
    copilot, fake_provider, make_user, make_order, db
):
    sam = await make_user()
    order = await make_order(sam, "Leaking tap")
    await make_order(sam, "Squeaky door")
    secret = b"door code 4711, never for the model"

    async def chunks():
        yield secret

    await attachments.upload(db=db, actor=actor(sam), order_id=order.id, name="codes.txt", chunks=chunks())
    fake_provider.script(Turn.tool_calls(("list_my_work_orders", {})), Turn.text("Two."))

    await copilot(sam, "what do I have?")

    (result,) = tool_messages(fake_provider.requests)
    by_title = {o["title"]: o for o in result["workOrders"]}
    assert by_title["Leaking tap"]["files"] == [{"name": "codes.txt", "size": len(secret)}]
    assert "files" not in by_title["Squeaky door"]
    assert all(b"4711" not in json.dumps(r).encode() for r in fake_provider.requests)
