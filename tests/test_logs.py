"""Logs are JSON lines, and secrets never reach them (SEC-1)."""

import asyncio
import json
import logging
import re

from desk import logs
from desk.config import Settings
from desk.logs import JsonFormatter, RedactingFilter, failure, never_log, redact, tag, untag
from tests.fake_provider import Turn

SECRETS = [
    "Authorization: Bearer wod_abcdefghijklmnop",
    "api_key=sk-live-0123456789abcdef",
    '{"password": "hunter2-hunter2"}',
    "cookie=desk_session-value-123",
    "token wod_ZZZZZZZZZZZZZZZZ leaked",
]


def test_redact_hides_every_secret_shape():
    for line in SECRETS:
        cleaned = redact(line)
        assert "[REDACTED]" in cleaned
        for secret in ["wod_abcdefghijklmnop", "sk-live-0123456789abcdef", "hunter2-hunter2", "desk_session-value-123"]:
            assert secret not in cleaned


def test_the_handler_writes_redacted_json_lines(capsys):
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("desk.test.redaction")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("provider said %s", "api_key=sk-live-0123456789abcdef")
        try:
            raise RuntimeError("Bearer wod_abcdefghijklmnop rejected")
        except RuntimeError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)

    lines = [json.loads(line) for line in capsys.readouterr().err.strip().splitlines()]
    assert lines[0]["level"] == "warning" and lines[0]["message"] == "provider said api_key=[REDACTED]"
    assert "wod_abcdefghijklmnop" not in lines[1]["error"] and "RuntimeError" in lines[1]["error"]


def test_configured_secrets_are_redacted_whatever_they_look_like(monkeypatch):
    monkeypatch.setattr("desk.logs._CONFIGURED", [])
    settings = Settings(
        mongodb_uri="mongodb://desk:Plain0ld%40Passw0rd@db.internal:27017/",
        desk_secret="s" * 40,
        ai_api_key="9f8e7d6c5b4a39281706",  # a self-hosted model's key: no sk- prefix, no key= before it
    )

    never_log(*settings.secrets())

    line = "call failed with 9f8e7d6c5b4a39281706; retried as desk:Plain0ld@Passw0rd, uri desk:Plain0ld%40Passw0rd"
    assert redact(line) == "call failed with [REDACTED]; retried as desk:[REDACTED], uri desk:[REDACTED]"
    assert "s" * 40 not in redact("storage " + "s" * 40)
    assert redact("a short word like desk stays") == "a short word like desk stays"


def test_a_configured_secret_that_is_also_a_key_word_does_not_unmask_a_value(monkeypatch):
    monkeypatch.setattr("desk.logs._CONFIGURED", [])
    never_log("password")  # a careless admin password

    assert "hunter2hunter2" not in redact("password=hunter2hunter2")


async def test_lines_written_in_a_tagged_context_and_its_tasks_carry_its_ids_and_no_others(capsys):
    async def write_all(logger: logging.Logger) -> None:
        logger.info("before")
        token = tag(requestId="r1")
        tag(runId="run-7")
        await asyncio.create_task(asyncio.to_thread(logger.info, "in a thread"))
        await asyncio.create_task(_log_soon(logger, "in a task"))
        untag(token)
        logger.info("after")

    lines = await _async_lines("desk.test.ids", capsys, write_all)

    assert [(line["message"], line.get("requestId"), line.get("runId")) for line in lines] == [
        ("before", None, None),
        ("in a thread", "r1", "run-7"),
        ("in a task", "r1", "run-7"),
        ("after", None, None),
    ]


async def test_a_request_and_the_copilot_turn_it_streams_log_under_one_request_id_and_the_run_id(
    app, make_user, client_for, provider, fake_provider, caplog
):
    seen: list[dict] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(json.loads(JsonFormatter().format(record)))

    keep = Keep()
    logging.getLogger("desk").addHandler(keep)
    try:
        client = await client_for(await make_user())
        session = (await client.post("/api/v1/ai/sessions")).json()
        fake_provider.script(Turn.error(500))  # the provider fails: the desk logs it, without the person's words
        answer = await client.post(f"/api/v1/ai/sessions/{session['id']}/messages", json={"content": "hi"})
    finally:
        logging.getLogger("desk").removeHandler(keep)

    assert answer.status_code == 200
    failed = [line for line in seen if line["message"].startswith("AI provider call failed")]
    assert len(failed) == 1
    run = (await client.get("/api/v1/ai/runs")).json()[0]
    assert failed[0]["runId"] == run["id"] and len(failed[0]["requestId"]) == 16


async def _log_soon(logger: logging.Logger, message: str) -> None:
    logger.info(message)


async def _async_lines(logger_name: str, capsys, write) -> list[dict]:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        await write(logger)
    finally:
        logger.removeHandler(handler)
    return [json.loads(line) for line in capsys.readouterr().err.splitlines()]


def test_a_failure_is_told_by_its_type_and_place_never_by_its_message():
    def read_order() -> None:
        raise TypeError("Leaking tap in the kitchen, call 555-0100")  # a message may quote a document

    try:
        read_order()
    except TypeError as error:
        said = failure(error)

    assert re.fullmatch(r"TypeError at test_logs\.py:\d+ in read_order", said)
    assert failure(TypeError("never raised")) == "TypeError"


def test_the_desks_own_code_is_its_package_not_any_folder_named_desk(tmp_path):
    """A clone named `desk`, or a library in a venv under it, is not the desk's own code."""
    library = compile("def lib():\n    raise ValueError('secret words')\n", str(tmp_path / "desk" / "lib.py"), "exec")
    ours = compile("def call(f):\n    f()\n", logs.__file__, "exec")  # a frame in the desk package itself
    space: dict = {}
    exec(library, space)  # noqa: S102 - code of this test's own making
    exec(ours, space)  # noqa: S102
    try:
        space["call"](space["lib"])
    except ValueError as error:
        said = failure(error)

    assert said == "ValueError at lib.py:2 in lib, from logs.py:2 in call"
