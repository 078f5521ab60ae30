"""Bad input gets the right envelope and status, nothing is half-written, and the server never answers 500."""

import logging
from datetime import timedelta

import pytest
from bson import ObjectId
from fastapi import FastAPI

from desk.agent.core.store import agent_runs
from desk.app import install_api

ORDERS = "/api/v1/work-orders"


async def _snapshot(db) -> list:
    return [await db[name].find({}, {"_id": 0}).to_list() for name in ("work_orders", "activity", "users")]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"title": ""}, "title"),
        ({"title": "   "}, "title"),
        ({"title": "\u200b"}, "title"),  # characters that show nothing are as empty as spaces
        ({"title": "\ufeff \u3164\u2060"}, "title"),
        ({"title": "x" * 201}, "title"),
        ({"title": "ok", "description": "x" * 5001}, "description"),
        ({"title": "ok", "priority": "asap"}, "priority"),
        ({"title": 42}, "title"),
        ({"title": ["a"]}, "title"),
        ({"title": "ok", "status": "done"}, "status"),
        ({"title": "ok", "version": 3}, "version"),
        ({"title": "ok", "surprise": True}, "surprise"),
        ({}, "title"),
    ],
)
async def test_invalid_create_bodies(body, field, make_user, client_for, db):
    client = await client_for(await make_user("user"))
    before = await _snapshot(db)

    response = await client.post(ORDERS, json=body)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert field in [problem["field"] for problem in error["details"]["fields"]]
    assert await _snapshot(db) == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"title": "no version"}, "version"),
        ({"version": "1", "title": "x"}, "version"),
        ({"version": 0, "title": "x"}, "version"),
        ({"version": -4, "title": "x"}, "version"),
        ({"version": 1.5, "title": "x"}, "version"),
        ({"version": 1, "status": "closed"}, "status"),
        ({"version": 1, "title": ""}, "title"),
        ({"version": 1, "title": "\u200b\u180e"}, "title"),
        ({"version": 1, "createdAt": "2020-01-01"}, "createdAt"),
        ({"version": 1, "id": "5f0000000000000000000000"}, "id"),
    ],
)
async def test_invalid_update_bodies_write_nothing(body, field, make_user, client_for, make_order, db):
    sam = await make_user("user")
    client = await client_for(sam)
    order = await make_order(sam)
    before = await _snapshot(db)

    response = await client.patch(f"{ORDERS}/{order.id}", json=body)

    assert response.status_code == 400
    assert field in [p["field"] for p in response.json()["error"]["details"]["fields"]]
    assert await _snapshot(db) == before


async def test_malformed_json_is_a_validation_error(make_user, client_for, db):
    client = await client_for(await make_user("user"))

    response = await client.post(
        ORDERS, content=b'{"title": "unterminated', headers={"Content-Type": "application/json"}
    )

    assert response.status_code == 400
    assert response.json()["error"] | {"details": None} == {
        "code": "VALIDATION_ERROR",
        "message": "The request body is not valid JSON.",
        "details": None,
    }
    assert await db["work_orders"].count_documents({}) == 0


async def test_a_body_over_one_mebibyte_is_refused_413_as_it_arrives(make_user, client_for, db):
    client = await client_for(await make_user("user"))
    huge = b'{"title": "' + b"a" * (1024 * 1024) + b'"}'

    async def streamed():  # no Content-Length: the limit counts what arrives
        for start in range(0, len(huge), 64 * 1024):
            yield huge[start : start + 64 * 1024]

    told = await client.post(ORDERS, content=huge, headers={"Content-Type": "application/json"})
    sent = await client.post(ORDERS, content=streamed(), headers={"Content-Type": "application/json"})

    for response in (told, sent):
        assert response.status_code == 413
        assert response.json() == {
            "error": {"code": "VALIDATION_ERROR", "message": "The request body is over 1024 KiB; nothing was saved."}
        }
    assert await db["work_orders"].count_documents({}) == 0
    just_under = {"title": "Leaking tap", "description": "x" * 5000}  # the biggest order there is still goes in
    assert (await client.post(ORDERS, json=just_under)).status_code == 201


async def test_a_body_too_large_for_no_route_gets_the_routes_answer_not_a_crash(make_user, client_for, caplog):
    # the 404 and 405 handlers' look for a client that left read the body first, and its refusal escaped them:
    # a 500 in the log and the metrics, from anyone, with no login
    client = await client_for(await make_user("user"))
    huge = b'{"title": "' + b"a" * (1024 * 1024) + b'"}'

    nowhere = await client.post("/api/v1/no-such-thing", content=huge, headers={"Content-Type": "application/json"})
    wrong_method = await client.put(ORDERS, content=huge, headers={"Content-Type": "application/json"})

    assert (nowhere.status_code, nowhere.json()["error"]["code"]) == (404, "NOT_FOUND")
    assert (wrong_method.status_code, wrong_method.json()["error"]["code"]) == (405, "METHOD_NOT_ALLOWED")
    assert "POST" in wrong_method.headers["allow"]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_malformed_json_names_the_body_not_a_character_position(make_user, client_for):
    client = await client_for(await make_user("user"))

    response = await client.post(ORDERS, content=b"{bad", headers={"Content-Type": "application/json"})

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["message"] == "The request body is not valid JSON."
    assert [(p["field"], p["message"]) for p in error["details"]["fields"]] == [("body", "not valid JSON")]


@pytest.mark.parametrize(
    "body",
    [b'{"title": "\xff"}', b"[" * 100_000 + b"]" * 100_000],
    ids=["not UTF-8", "nested 100,000 deep"],
)
async def test_a_body_json_cannot_read_is_told_so_like_any_malformed_json(body, make_user, client_for, db):
    client = await client_for(await make_user("user"))

    response = await client.post(ORDERS, content=body, headers={"Content-Type": "application/json"})

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["message"] == "The request body is not valid JSON."
    assert [(p["field"], p["message"]) for p in error["details"]["fields"]] == [("body", "not valid JSON")]
    assert await db["work_orders"].count_documents({}) == 0


@pytest.mark.parametrize("headers", [{"Content-Type": "text/plain"}, {}], ids=["as text", "of no type"])
async def test_a_body_sent_as_another_type_than_json_is_told_to_send_json(headers, make_user, client_for, db):
    client = await client_for(await make_user("user"))

    response = await client.post(ORDERS, content=b'{"title": "Leaking tap"}', headers=headers)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["message"] == "Send the request body as JSON, with Content-Type: application/json."
    assert [p["field"] for p in error["details"]["fields"]] == ["body"]
    assert await db["work_orders"].count_documents({}) == 0


async def test_text_that_is_not_unicode_is_refused_in_the_desks_words(make_user, client_for):
    client = await client_for(await make_user("user"))

    lone_surrogate = b'{"title": "\\ud800 tap"}'  # JSON's escape for half of a UTF-16 pair: no character at all
    response = await client.post(ORDERS, content=lone_surrogate, headers={"Content-Type": "application/json"})

    assert response.status_code == 400
    assert response.json()["error"]["details"]["fields"] == [
        {"field": "title", "message": "must be text (Unicode)", "type": "string_unicode"}
    ]


async def test_a_json_list_instead_of_an_object(make_user, client_for):
    client = await client_for(await make_user("user"))
    response = await client.post(ORDERS, json=["title", "x"])
    assert response.status_code == 400 and response.json()["error"]["code"] == "VALIDATION_ERROR"


@pytest.mark.parametrize(
    "params",
    [
        {"offset": -1},
        {"offset": 10_001},
        {"limit": 0},
        {"limit": 101},
        {"limit": "ten"},
        {"offset": "9" * 40},
        {"sort": "password"},
        {"status": "lost"},
        {"priority": "p1"},
        {"q": "x" * 201},
        {"unknown": "1"},
    ],
)
async def test_bad_list_parameters(params, make_user, client_for):
    client = await client_for(await make_user("user"))

    response = await client.get(ORDERS, params=params)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"


async def test_a_repeatable_parameter_is_named_as_sent_not_by_its_place(make_user, client_for):
    client = await client_for(await make_user("user"))

    response = await client.get(ORDERS, params=[("status", "pending"), ("status", "open")])

    assert response.status_code == 400
    (problem,) = response.json()["error"]["details"]["fields"]
    assert problem["field"] == "status" and problem["message"].startswith("must be ")
    assert response.json()["error"]["message"].startswith("The request is not valid: status: must be ")


@pytest.mark.parametrize("order_id", ["nope", "123", "5f000000000000000000000g", "5f0000000000000000000000", "%00"])
async def test_invalid_and_unknown_ids_are_not_found(order_id, make_user, client_for):
    client = await client_for(await make_user("admin"))

    responses = [
        await client.get(f"{ORDERS}/{order_id}"),
        await client.patch(f"{ORDERS}/{order_id}", json={"version": 1, "title": "x"}),
        await client.delete(f"{ORDERS}/{order_id}", params={"version": 1}),
        await client.get(f"{ORDERS}/{order_id}/activity"),
        await client.patch(f"/api/v1/admin/users/{order_id}", json={"name": "x"}),
        await client.delete(f"/api/v1/auth/tokens/{order_id}"),
    ]

    assert [r.status_code for r in responses] == [404] * 6
    assert {r.json()["error"]["code"] for r in responses} == {"NOT_FOUND"}


async def test_invalid_owner_id_filter_is_a_validation_error(make_user, client_for):
    client = await client_for(await make_user("admin"))
    response = await client.get(ORDERS, params={"ownerId": "not-an-id"})
    assert response.status_code == 400
    (problem,) = response.json()["error"]["details"]["fields"]  # one problem, though the value fits none of two forms
    assert problem["field"] == "ownerId" and problem["message"].startswith("must be an id of 24 hexadecimal digits")


async def test_delete_without_or_with_a_bad_version(make_user, client_for, make_order, db):
    sam = await make_user("user")
    client = await client_for(sam)
    order = await make_order(sam)

    missing = await client.delete(f"{ORDERS}/{order.id}")
    bad = await client.delete(f"{ORDERS}/{order.id}", params={"version": "one"})

    assert (missing.status_code, bad.status_code) == (400, 400)
    assert await db["work_orders"].count_documents({"_id": ObjectId(order.id)}) == 1


async def test_unknown_api_paths_and_methods_answer_in_the_envelope(anonymous):
    missing = await anonymous.get("/api/v1/nothing-here")
    wrong_method = await anonymous.put("/api/v1/work-orders")

    assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"
    assert wrong_method.status_code == 405 and wrong_method.json()["error"]["code"] == "METHOD_NOT_ALLOWED"
    assert wrong_method.headers["Allow"] == "GET, HEAD, POST"


async def test_an_address_with_a_trailing_slash_is_a_404_that_names_the_right_one(make_user, client_for, db):
    # was a bare 307 to http://…, whatever the scheme the desk is served on, with no envelope
    client = await client_for(await make_user("user"))

    listed = await client.get(f"{ORDERS}/")
    created = await client.post(f"{ORDERS}/", json={"title": "Leaking tap"})

    for response in (listed, created):
        assert response.status_code == 404
        assert response.json()["error"] == {
            "code": "NOT_FOUND",
            "message": f"No such endpoint; did you mean {ORDERS} (no slash at the end)?",
        }
    assert await db["work_orders"].count_documents({}) == 0


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("TRACE", "/api/v1/work-orders/5f0000000000000000000000", "GET, HEAD, PATCH, DELETE"),
        ("PUT", "/api/v1/admin/users/5f0000000000000000000000", "GET, HEAD, PATCH"),
        ("DELETE", "/healthz", "GET, HEAD"),
        ("HEAD", "/api/v1/auth/login", "POST"),
    ],
)
async def test_a_method_a_path_does_not_take_is_405_with_every_method_it_does(method, path, allowed, anonymous):
    # Starlette names only the first route of the path in Allow: a path served by three routes took "GET"
    response = await anonymous.request(method, path)

    assert response.status_code == 405
    assert response.headers["Allow"] == allowed
    if method != "HEAD":  # a HEAD answer has no body to say it in
        error = response.json()["error"]
        assert error["code"] == "METHOD_NOT_ALLOWED" and error["message"].endswith(f"it takes {allowed}.")


async def test_head_answers_as_get_would_without_the_body(make_user, client_for, make_order, anonymous):
    sam = await make_user("user")
    await make_order(sam, "Leaking tap")
    client = await client_for(sam)

    got, head = await client.get(ORDERS), await client.head(ORDERS)
    unauthorized = await anonymous.head(ORDERS)

    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["content-type"] == got.headers["content-type"] == "application/json"
    assert head.headers["content-length"] == got.headers["content-length"] == str(len(got.content))
    assert (unauthorized.status_code, unauthorized.content) == (401, b"")
    assert unauthorized.headers["WWW-Authenticate"].startswith("Bearer")
    assert (await anonymous.head("/healthz")).status_code == 200


async def test_requests_without_a_session_are_unauthorized(anonymous):
    for response in [
        await anonymous.get(ORDERS),
        await anonymous.post(ORDERS, json={"title": "x"}),
        await anonymous.get("/api/v1/admin/metrics"),
        await anonymous.get("/api/v1/auth/me"),
    ]:
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "UNAUTHORIZED"


@pytest.mark.parametrize(
    "body",
    [
        {"email": "a@example.com"},
        {"email": "a@example.com", "password": "x" * 1025},
        {"email": "", "password": "x"},
        {"email": "a@example.com", "password": "secret", "remember": True},
        {"email": 5, "password": "x"},
    ],
)
async def test_bad_login_bodies(body, anonymous):
    response = await anonymous.post("/api/v1/auth/login", json=body)
    assert response.status_code == 400 and response.json()["error"]["code"] == "VALIDATION_ERROR"


async def test_validation_errors_never_echo_the_password(anonymous):
    response = await anonymous.post("/api/v1/auth/login", json={"email": ["x"], "password": "hunter2-secret"})
    assert response.status_code == 400
    assert "hunter2-secret" not in response.text


@pytest.mark.parametrize(
    "body",
    [
        {"email": "not-an-email", "name": "X", "password": "tulip-orbit-42"},
        {"email": "x@example.com", "name": "", "password": "tulip-orbit-42"},
        {"email": "x@example.com", "name": "X", "role": "root", "password": "tulip-orbit-42"},
        {"email": "x@example.com", "name": "X", "password": "tulip-orbit-42", "passwordHash": "$argon2id$"},
    ],
)
async def test_bad_user_bodies(body, make_user, client_for, db):
    client = await client_for(await make_user("admin"))
    response = await client.post("/api/v1/admin/users", json=body)
    assert response.status_code == 400
    assert await db["users"].count_documents({}) == 1


async def test_an_admin_user_update_with_nothing_to_change_writes_nothing(make_user, client_for, db):
    admin, sam = await make_user("admin"), await make_user("user")
    before = await _snapshot(db)

    response = await (await client_for(admin)).patch(f"/api/v1/admin/users/{sam['id']}", json={})

    assert response.status_code == 400
    assert response.json()["error"] == {"code": "VALIDATION_ERROR", "message": "Nothing to change."}
    assert await _snapshot(db) == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": None}, "name"),
        ({"role": None}, "role"),
        ({"aiEnabled": None}, "aiEnabled"),
        ({"active": None}, "active"),
        ({"password": None}, "password"),
        ({"name": "Sam R.", "active": None}, "active"),
    ],
)
async def test_a_null_in_an_admin_user_update_names_the_field_and_writes_nothing(
    body, field, make_user, client_for, db
):
    admin, sam = await make_user("admin"), await make_user("user")
    before = await _snapshot(db)

    response = await (await client_for(admin)).patch(f"/api/v1/admin/users/{sam['id']}", json=body)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert [(p["field"], p["type"]) for p in error["details"]["fields"]] == [(field, "not_null")]
    assert error["message"].startswith(f"The request is not valid: {field}: must not be null")
    assert await _snapshot(db) == before


@pytest.mark.parametrize(
    ("method", "path", "body", "field", "collection"),
    [
        (
            "post",
            "/api/v1/admin/users",
            {"email": "x@example.com", "name": "Dana\u0000", "password": "tulip-orbit-42"},
            "name",
            "users",
        ),
        ("post", "/api/v1/auth/tokens", {"name": "ci\u001b[31m"}, "name", "api_tokens"),
    ],
    ids=["a person's name", "a token's name"],
)
async def test_every_text_field_refuses_control_characters(
    method, path, body, field, collection, make_user, client_for, db
):
    client = await client_for(await make_user("admin"))
    before = await db[collection].count_documents({})

    response = await getattr(client, method)(path, json=body)

    assert response.status_code == 400
    error = response.json()["error"]
    assert [problem["field"] for problem in error["details"]["fields"]] == [field]
    assert "control character" in error["message"]
    assert await db[collection].count_documents({}) == before


@pytest.mark.parametrize("bidi", ["\u202e", "\u202a", "\u2066", "\u2069"], ids=["RLO", "LRE", "LRI", "PDI"])
@pytest.mark.parametrize(
    ("path", "body", "field", "collection"),
    [
        ("/api/v1/work-orders", {"title": "Invoice {}fdp.exe"}, "title", "work_orders"),
        (
            "/api/v1/admin/users",
            {"email": "x@example.com", "name": "Dana{}", "password": "tulip-orbit-42"},
            "name",
            "users",
        ),
        ("/api/v1/auth/tokens", {"name": "ci{}"}, "name", "api_tokens"),
    ],
    ids=["a work order's title", "a person's name", "a token's name"],
)
async def test_single_line_fields_refuse_bidirectional_controls(
    bidi, path, body, field, collection, make_user, client_for, db
):
    client = await client_for(await make_user("admin"))
    before = await db[collection].count_documents({})
    sent = {key: value.format(bidi) if key == field else value for key, value in body.items()}

    response = await client.post(path, json=sent)

    assert response.status_code == 400
    error = response.json()["error"]
    assert [problem["field"] for problem in error["details"]["fields"]] == [field]
    assert f"U+{ord(bidi):04X}" in error["message"]
    assert await db[collection].count_documents({}) == before


# --- what the fuzzer found: the schema states each rule the API enforces, in the same words everywhere ---


async def test_a_time_in_a_query_is_a_moment_or_a_day_not_a_number(make_user, client_for, db):
    # the runs took only a moment where the metrics take a day (and the runs page's address shows one):
    # a day now means from its midnight (since) or through its end (until)
    admin = await make_user("admin")
    client = await client_for(admin)
    run = agent_runs.new_run(
        session_id=None, user_id=ObjectId(admin["id"]), mode="copilot", model="m", lease=timedelta()
    )
    await agent_runs.insert_run(db, run)
    today, runs_url = run["startedAt"].date(), "/api/v1/admin/agents/runs"

    async def found(**params: str) -> int:
        answer = await client.get(runs_url, params=params)
        assert answer.status_code == 200, answer.text
        return answer.json()["total"]

    assert await found(since=str(today), until=str(today)) == 1  # the whole day
    assert await found(until=str(today - timedelta(days=1))) == 0
    assert await found(since=str(today + timedelta(days=1))) == 0
    assert await found(until="9999-12-31", since="0001-01-01") == 1  # the calendar's ends
    assert await found(since=run["startedAt"].isoformat()) == 1  # a moment, as before

    refused = [await client.get(runs_url, params={"until": value}) for value in ("0.5", "1700000000", "2026-02-30")]
    assert [answer.status_code for answer in refused] == [400, 400, 400]
    words = [answer.json()["error"]["details"]["fields"][0]["message"] for answer in refused]
    assert (
        words[0]
        == words[1]
        == ("must be a date and time with its offset, such as 2026-01-31T09:00:00Z, or a day such as 2026-01-31")
    )
    assert words[2] == "must be a day such as 2026-01-31"


@pytest.mark.parametrize("bound", [{"since": "0001-01-01T00:00:00+01:00"}, {"until": "9999-12-31T23:59:59-01:00"}])
async def test_a_time_whose_offset_takes_it_past_the_calendar_is_a_400_not_a_500(bound, make_user, client_for):
    # found by a QA pass: well formed, but in UTC before year 1 or after 9999, and the database could not store it
    client = await client_for(await make_user("admin"))

    response = await client.get("/api/v1/admin/agents/runs", params=bound)

    assert response.status_code == 400
    assert response.json()["error"]["details"]["fields"] == [
        {
            "field": next(iter(bound)),
            "message": "must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z",
            "type": "datetime_range",
        }
    ]


async def test_the_first_and_last_days_there_are_can_be_asked_for(make_user, client_for, make_order):
    # found by a QA pass: the order list's `opened=9999-12-31` was a 500 (its day has no next day to end before)
    sam = await make_user("user")
    client = await client_for(sam)
    await make_order(sam)

    answers = [await client.get(ORDERS, params={"opened": day}) for day in ("0001-01-01", "9999-12-31")]

    assert [(answer.status_code, answer.json()["total"]) for answer in answers] == [(200, 0), (200, 0)]


async def test_a_well_formed_owner_that_names_nobody_is_not_found_not_a_bad_request(make_user, client_for, db):
    client = await client_for(await make_user("admin"))

    response = await client.post(ORDERS, json={"title": "New chairs", "ownerId": "5f0000000000000000000000"})

    assert response.status_code == 404
    assert response.json()["error"]["details"]["fields"][0]["field"] == "ownerId"
    assert await db["work_orders"].count_documents({}) == 0


async def test_a_length_limit_counts_the_text_as_sent(make_user, client_for, db):
    # the schema's maxLength is on what is sent: 200 characters and a space around them is too long
    client = await client_for(await make_user("user"))

    padded = await client.post(ORDERS, json={"title": f" {'x' * 200} "})
    crlf = await client.post(ORDERS, json={"title": "ok", "description": "\r\n" * 2501})

    assert (padded.status_code, crlf.status_code) == (400, 400)
    assert await db["work_orders"].count_documents({}) == 0


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"email": "no-at-sign", "name": "X", "password": "tulip-orbit-42"}, "email: must be an email address"),
        ({"email": "  ", "name": "X", "password": "tulip-orbit-42"}, "email: required"),  # as a name's "empty"
        ({"email": "x@example.com", "name": "X", "role": "root", "password": "tulip-orbit-42"}, "role: must be one of"),
        ({"email": "x@example.com", "name": 5, "password": "tulip-orbit-42"}, "name: must be text"),
        ({"email": "x@example.com", "name": "", "password": "tulip-orbit-42"}, "name: must not be empty"),
        ({"email": "x@example.com", "name": "x" * 101, "password": "tulip-orbit-42"}, "at most 100 characters"),
    ],
)
async def test_messages_are_written_for_people(body, words, make_user, client_for):
    client = await client_for(await make_user("admin"))

    error = (await client.post("/api/v1/admin/users", json=body)).json()["error"]

    assert words in error["message"]
    assert not any(pydantic in error["message"] for pydantic in ("Value error", "Input should", "String should"))


@pytest.mark.parametrize("title", ["!!!", "💧", "—"])
async def test_an_order_with_no_word_in_it_is_created_not_a_500(title, make_user, client_for):
    # found by the fuzzer: its search postings were an empty list, which insert_many refuses
    client = await client_for(await make_user("user"))

    created = await client.post(ORDERS, json={"title": title})
    edited = await client.patch(f"{ORDERS}/{created.json()['id']}", json={"version": 1, "description": "?"})

    assert (created.status_code, edited.status_code) == (201, 200)
    assert [order["title"] for order in (await client.get(ORDERS)).json()["items"]] == [title]


@pytest.mark.parametrize(
    ("path", "model", "least"),
    [
        ("/api/v1/work-orders/{order_id}", "WorkOrderUpdate", 2),
        ("/api/v1/admin/users/{user_id}", "UserAdminUpdate", 1),
        ("/api/v1/admin/agents/triage/config", "AgentConfigUpdate", 2),
    ],
)
def test_an_update_with_nothing_to_change_is_refused_by_the_schema_too(path, model, least):
    # found by the fuzzer: {"version": 1} was schema-valid, yet answered 400 "Nothing to change."
    app = FastAPI()
    install_api(app)
    schema = app.openapi()

    body = schema["paths"][path]["patch"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["$ref"].endswith(f"/{model}")
    assert schema["components"]["schemas"][model]["minProperties"] == least


@pytest.mark.parametrize(
    ("path", "query", "field"),
    [
        (ORDERS, "limit=5&limit=50", "limit"),
        (ORDERS, "priority=low&priority=high", "priority"),
        ("/api/v1/admin/users", "offset=0&offset=25", "offset"),
    ],
)
async def test_a_query_parameter_given_twice_is_a_clear_400_not_the_last_one_wins(
    path, query, field, make_user, client_for
):
    client = await client_for(await make_user("admin"))

    response = await client.get(f"{path}?{query}")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["message"] == f"Give {field} once, not more."
    assert error["details"]["fields"] == [{"field": field, "message": "given more than once", "type": "repeated"}]


@pytest.mark.parametrize(
    "path",
    [
        ORDERS,
        f"{ORDERS}/{{order_id}}",
        f"{ORDERS}/{{order_id}}/activity",
        f"{ORDERS}/{{order_id}}/comments",
        "/api/v1/auth/me",
        "/api/v1/admin/users",
    ],
)
async def test_a_query_parameter_no_endpoint_takes_is_refused_everywhere_alike(path, make_user, client_for, make_order):
    # lists refused ?stauts=done while an order, its timeline or /auth/me silently took anything
    dana = await make_user("admin")
    client = await client_for(dana)
    order = await make_order(dana)

    response = await client.get(path.format(order_id=order.id), params={"stauts": "done"})

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["message"] == "The request is not valid: stauts: unknown field."
    assert error["details"]["fields"] == [{"field": "stauts", "message": "unknown field", "type": "extra_forbidden"}]


async def test_a_whole_number_sent_with_a_point_is_a_whole_number(make_user, client_for, make_order):
    # found by the fuzzer: JSON Schema's integer takes 1.0, the strict model did not; 1.5 stays refused
    sam = await make_user("user")
    client = await client_for(sam)
    order = await make_order(sam)

    half = await client.patch(f"{ORDERS}/{order.id}", json={"version": 1.5, "title": "Dripping tap"})
    whole = await client.patch(f"{ORDERS}/{order.id}", json={"version": 1.0, "title": "Dripping tap"})

    assert (half.status_code, whole.status_code) == (400, 200)
    assert whole.json()["version"] == 2


@pytest.mark.parametrize("value", ["0", "1700000000", "2026-1-5", "2026-01-31T00:00:00Z", "2026-13-01", "2026-02-30"])
async def test_a_day_in_a_query_is_yyyy_mm_dd_not_a_number(value, make_user, client_for):
    # found by the fuzzer: opened=0 was read as a timestamp (1970-01-01), though the schema says a date
    client = await client_for(await make_user("admin"))

    refused = await client.get(ORDERS, params={"opened": value})
    taken = await client.get(ORDERS, params={"opened": "2026-01-31"})

    assert (refused.status_code, taken.status_code) == (400, 200)
    assert refused.json()["error"]["details"]["fields"][0]["message"] == "must be a day such as 2026-01-31"


@pytest.mark.parametrize("value", ["5_0", " 7", "+7", "7.5", "0x10"])
async def test_a_whole_number_in_a_query_is_written_in_digits(value, make_user, client_for):
    # found by a QA pass: limit=5_0 was read as 50 (Python's int() takes underscores, spaces and a sign)
    client = await client_for(await make_user("user"))

    refused = await client.get(ORDERS, params={"limit": value})
    taken = [await client.get(ORDERS, params={"limit": whole}) for whole in ("50", "50.0")]

    assert (refused.status_code, [answer.status_code for answer in taken]) == (400, [200, 200])
    assert refused.json()["error"]["details"]["fields"] == [
        {"field": "limit", "message": "must be a whole number", "type": "int_parsing"}
    ]
