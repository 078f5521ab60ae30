"""The assembled API: health checks, OpenAPI docs with the error responses, first admin, demo seed."""

import importlib
import inspect
import json
import logging
import re

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import ValidationError

from desk.app import ensure_first_admin, install_api
from desk.config import Settings
from desk.seed import DEMO_PASSWORD, seed_demo
from desk.work_orders import counters
from tests.helpers import PASSWORD


async def test_health_and_readiness(anonymous):
    assert (await anonymous.get("/healthz")).json() == {"status": "ok"}
    assert (await anonymous.get("/readyz")).json() == {"status": "ready"}


async def test_a_probe_with_a_query_is_still_answered(anonymous, make_user, client_for):
    # a load balancer may add a cache-buster; every other route refuses a query it does not take
    assert (await anonymous.get("/healthz", params={"t": "1733130000"})).json() == {"status": "ok"}
    assert (await anonymous.get("/readyz", params={"t": "1733130000"})).json() == {"status": "ready"}
    client = await client_for(await make_user("user"))
    assert (await client.get("/api/v1/work-orders", params={"t": "1"})).status_code == 400


def test_every_route_that_takes_a_body_documents_the_413_for_one_too_large():
    app = FastAPI()
    install_api(app)
    operations = [op for methods in app.openapi()["paths"].values() for op in methods.values()]

    with_body = [op for op in operations if "requestBody" in op]
    assert with_body and all(op["responses"]["413"]["description"].startswith("VALIDATION_ERROR") for op in with_body)
    assert not any("413" in op["responses"] for op in operations if "requestBody" not in op)


UNSUBSCRIBE = "/api/v1/notifications/unsubscribe/{token}"


def test_every_api_route_documents_its_error_envelope():
    app = FastAPI()
    install_api(app)
    schema = app.openapi()

    for path, operations in schema["paths"].items():
        if not path.startswith("/api/"):
            continue
        for method, operation in operations.items():
            documented = {code for code in operation["responses"] if code.startswith(("4", "5"))}
            assert "400" in documented, f"{method.upper()} {path}"
            assert "422" not in documented, f"{method.upper()} {path}: validation errors are 400 in the envelope"
            if path not in ("/api/v1/auth/login", UNSUBSCRIBE):  # no login: a password, or a signed link (RFC 8058)
                assert {"401", "403"} <= documented, f"{method.upper()} {path}"
            envelope = operation["responses"]["400"]["content"]["application/json"]["schema"]["$ref"]
            assert envelope.endswith("/ErrorEnvelope")


def test_no_route_or_dependency_leaves_the_event_loop():
    """FastAPI runs a plain `def` route or dependency in a worker thread: a thread hop on every request."""
    app = FastAPI()
    install_api(app)

    def calls(dependant) -> list:
        return [dependant.call, *(call for sub in dependant.dependencies for call in calls(sub))]

    def api_routes(routes) -> list[APIRoute]:  # FastAPI keeps an included router as one entry that points at it
        found = []
        for route in routes:
            if isinstance(route, APIRoute):
                found.append(route)
            elif (included := getattr(route, "original_router", None)) is not None:
                found += api_routes(included.routes)
        return found

    routes = api_routes(app.routes)
    assert len(routes) > 20
    for route in routes:
        for call in calls(route.dependant):
            assert inspect.iscoroutinefunction(call), f"{route.path}: {call.__qualname__} is not async"


async def test_first_boot_creates_an_admin_with_a_one_time_password(db, anonymous):
    first = await ensure_first_admin(db, Settings())

    assert first.email == "admin@desk.local" and len(first.password) >= 16
    login = await anonymous.post("/api/v1/auth/login", json={"email": first.email, "password": first.password})
    assert login.json()["role"] == "admin"
    assert await ensure_first_admin(db, Settings()) is None  # only on an empty desk


async def test_first_admin_from_the_environment(db, anonymous):
    settings = Settings(desk_admin_email="Boss@Example.com", desk_admin_password="a sturdy passphrase")

    first = await ensure_first_admin(db, settings)

    assert (first.email, first.password) == ("boss@example.com", None)
    login = await anonymous.post(
        "/api/v1/auth/login", json={"email": "boss@example.com", "password": "a sturdy passphrase"}
    )
    assert login.status_code == 200


async def test_a_weak_admin_password_from_the_environment_stops_the_boot(db):
    with pytest.raises(SystemExit, match="DESK_ADMIN_PASSWORD: That password is too common"):
        await ensure_first_admin(db, Settings(desk_admin_password="qwerty123456"))


async def test_demo_seed_makes_a_realistic_desk(db, anonymous):
    summary = await seed_demo(db)

    assert "200 demo work orders" in summary
    assert "dana.admin@example.com (admin)" in summary and "vic.moreau@example.com (viewer)" in summary
    assert sorted(await db["users"].distinct("role")) == ["admin", "user", "viewer"]
    orders = await db["work_orders"].find({}).to_list()
    assert len(orders) == 200
    assert {o["status"] for o in orders} == {"pending", "in_progress", "done", "cancelled"}
    assert {o["priority"] for o in orders} == {"low", "medium", "high", "urgent"}
    assert len({o["title"] for o in orders}) > 50
    ages = sorted(o["createdAt"] for o in orders)
    assert (ages[-1] - ages[0]).days >= 50
    assert (await counters.read(db, [counters.total_key()]))[counters.total_key()] == 200
    login = await anonymous.post(
        "/api/v1/auth/login", json={"email": "vic.moreau@example.com", "password": DEMO_PASSWORD}
    )
    assert login.json()["role"] == "viewer"
    assert "not added" in await seed_demo(db, only_if_empty=True)


async def test_a_client_that_leaves_mid_request_is_not_logged_as_our_failure(app, caplog):
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/v1/auth/login",
        "raw_path": b"/api/v1/auth/login",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"desk.test"), (b"content-type", b"application/json"), (b"x-desk-csrf", b"1")],
        "client": ("127.0.0.1", 50000),
        "server": ("desk.test", 80),
    }
    arriving = [
        {"type": "http.request", "body": b'{"email": "sam@example.com", ', "more_body": True},
        {"type": "http.disconnect"},  # the browser left before the rest of the body
    ]
    sent: list[dict] = []

    async def receive() -> dict:
        return arriving.pop(0) if arriving else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    await app(scope, receive, send)

    assert sent[0]["status"] == 499  # nobody is there to read it
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []  # no "unhandled error"


SAMPLES = [
    "",
    " ",
    "\t",
    "ok",
    " ok ",
    "\tok\n",
    "\u00a0ok\u3000",
    "o k",
    "o\tk",
    "o\nk",
    "o\r\nk",
    "\r\n",
    "o\rk",
    "o\x00k",
    "\x00",
    "ok\x1c",
    "\x1cok",
    "o\x85k",
    "o\u202ek",
    "\u2066",
    "o\ufeffk",
    "\ufeff",
    "x@y.z",
    " x@y.z ",
    "x@@y.z",
    "x@y",
    "x y@z.w",
    "Ωmega@ex.ample",
    "\u00a0",
    "o\u2028k",
    "é",
    "x" * 5,
    "💧 leak",
    "a\x7fb",
]


@pytest.mark.parametrize(
    ("model", "field"),
    [
        ("desk.work_orders.models:WorkOrderCreate", "title"),
        ("desk.work_orders.models:WorkOrderCreate", "description"),
        ("desk.users.models:UserCreate", "name"),
        ("desk.users.models:UserCreate", "email"),
        ("desk.auth.models:LoginRequest", "email"),
        ("desk.agent.core.models:MessageIn", "content"),
    ],
)
def test_a_text_fields_schema_pattern_says_exactly_what_its_validators_take(model, field):
    """Schemathesis generates from the pattern: a string it matches that the API refuses is a valid request rejected."""
    module, name = model.split(":")
    cls = getattr(importlib.import_module(module), name)
    schema = cls.model_json_schema(by_alias=True)["properties"][field]
    pattern = re.compile(schema["pattern"])
    base = {"title": "ok", "name": "X", "email": "x@y.z", "password": "tulip-orbit-42", "content": "hi"}
    alias = cls.model_fields[field].alias or field

    for sample in SAMPLES:
        data = {key: base[key] for key in ("title", "name", "email", "password", "content") if key in cls.model_fields}
        try:
            cls.model_validate({**data, alias: sample})
            taken = True
        except ValidationError:
            taken = False
        assert taken == bool(pattern.fullmatch(sample)), f"{name}.{field}: {sample!r}"


def test_updates_offer_no_null_but_the_queue_and_no_due_day_and_the_password_policy_is_in_the_schema():
    schema = _schema()
    shapes = schema["components"]["schemas"]

    for name in ("WorkOrderUpdate", "UserAdminUpdate"):
        for field, spec in shapes[name]["properties"].items():
            # the nulls with a meaning: back to the queue, and due by no day
            if (name, field) in {("WorkOrderUpdate", "ownerId"), ("WorkOrderUpdate", "dueAt")}:
                assert {"type": "null"} in spec["anyOf"]
                continue
            assert "anyOf" not in spec and "default" not in spec, f"{name}.{field} offers null"
    password = shapes["UserCreate"]["properties"]["password"]
    assert (password["minLength"], password["maxLength"]) == (12, 128)
    common = re.compile(password["not"]["pattern"])
    assert common.fullmatch("QWERTY123456") and common.fullmatch("qwerty123456")
    assert not common.fullmatch("tulip-orbit-42")


def _schema() -> dict:
    app = FastAPI()
    install_api(app)
    return app.openapi()


async def test_the_docs_page_works_offline_from_the_desks_own_files(anonymous):
    page = await anonymous.get("/api/docs")

    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "https://" not in page.text and "cdn" not in page.text  # nothing from another origin (the CSP is 'self')
    for asset in re.findall(r"""(?:src|href)=["']?([^"' >]+)""", page.text):
        fetched = await anonymous.get(asset)
        assert fetched.status_code == 200 and fetched.content, asset
    script = await anonymous.get("/api/docs/assets/swagger-ui-bundle.js")
    assert "javascript" in script.headers["content-type"] and b"SwaggerUIBundle" in script.content


def test_the_schema_declares_how_to_sign_in_so_the_docs_page_can_send_a_token():
    schema = _schema()

    schemes = schema["components"]["securitySchemes"]
    assert schemes["bearerToken"] == {**schemes["bearerToken"], "type": "http", "scheme": "bearer"}
    assert (schemes["sessionCookie"]["in"], schemes["sessionCookie"]["name"]) == ("cookie", "desk_session")
    assert (schemes["csrfHeader"]["in"], schemes["csrfHeader"]["name"]) == ("header", "X-Desk-CSRF")
    operations = {(path, method): op for path, ops in schema["paths"].items() for method, op in ops.items()}
    either = [{"bearerToken": []}, {"sessionCookie": [], "csrfHeader": []}]
    assert operations[("/api/v1/work-orders", "get")]["security"] == either
    # no one is signed in yet, but a client generated from the schema must send the header (it was a 403)
    assert operations[("/api/v1/auth/login", "post")]["security"] == [{"csrfHeader": []}]
    assert "security" not in operations[("/healthz", "get")]


def test_the_docs_list_their_sections_in_reading_order_whatever_order_routes_are_matched_in():
    schema = _schema()

    used = {tag for ops in schema["paths"].values() for op in ops.values() for tag in op.get("tags", [])}
    # Swagger UI shows the sections in this order; a tag missing here would show after them all
    sections = ["health", "auth", "work orders", "attachments", "notifications", "admin", "ai", "agents"]
    assert [tag["name"] for tag in schema["tags"]] == sections
    assert used == {tag["name"] for tag in schema["tags"]}


def test_every_numeric_limit_is_stated_in_json_schema_words():
    # a validator placed before Field(ge=...) once turned minimum into a bare "ge" no client or fuzzer reads
    text = json.dumps(_schema())

    assert not re.search(r'"(ge|le|gt|lt)":', text)
    assert '"minimum": 1' in text


async def test_no_content_answers_carry_no_content_type(make_user, client_for, make_order):
    admin, sam = await make_user("admin"), await make_user("user")
    sams, admins = await client_for(sam), await client_for(admin)
    order = await make_order(sam, "Gone soon")
    mine = (await sams.post("/api/v1/auth/tokens", json={"name": "mine"})).json()
    other = (await sams.post("/api/v1/auth/tokens", json={"name": "other"})).json()
    changed = {"currentPassword": PASSWORD, "newPassword": "a lighthouse keeper's ledger"}

    answers = [
        await sams.delete(f"/api/v1/work-orders/{order.id}", params={"version": 1}),
        await sams.delete(f"/api/v1/auth/tokens/{mine['id']}"),
        await admins.delete(f"/api/v1/admin/users/{sam['id']}/tokens/{other['id']}"),
        await sams.post("/api/v1/auth/password", json=changed),
        await admins.post("/api/v1/auth/logout"),
    ]

    assert [(a.status_code, a.content, a.headers.get("content-type")) for a in answers] == [(204, b"", None)] * 5
