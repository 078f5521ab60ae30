"""`desk eval triage` as a person runs it: killed mid-run and resumed, a bad set refused, beside a running desk."""

import json
import os
import signal
import subprocess
import sys
import time

from pymongo import MongoClient

from bench.harness import desk_env
from desk.agent.triage.eval import runs
from desk.db.embedded import EmbeddedMongo
from tests.helpers import per_process
from tests.triage.eval.hand_set import ORDERS, answer, title_of, write_set


def eval_command(*args: str, mongo_uri: str, fake_url: str, tmp_path) -> tuple[list[str], dict[str, str]]:
    env = desk_env(
        MONGODB_URI=mongo_uri,
        MONGODB_DB=per_process("desk_eval_cli"),
        DESK_DATA_DIR=str(tmp_path / "data"),
        AI_BASE_URL=fake_url,
        AI_API_KEY="sk-eval",
        AI_ALLOW_PRIVATE_BASE_URL="true",
    )
    return [sys.executable, "-m", "desk", "eval", "triage", *args], env


def wait_for(check, *, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "the eval did not get that far"
        time.sleep(0.05)


def test_a_killed_run_resumes_and_asks_only_what_it_had_not_answered(mongo_uri, fake_provider, tmp_path):
    fake_provider.respond = lambda request: answer(request).with_delay(0.15)  # slow enough to be killed mid-run
    out = tmp_path / "run"
    command, env = eval_command(
        "--set", str(write_set(tmp_path / "set.jsonl")), "--out", str(out), "--concurrency", "1",
        mongo_uri=mongo_uri, fake_url=fake_provider.url, tmp_path=tmp_path,
    )  # fmt: skip
    running = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # noqa: S603
    try:
        wait_for(lambda: (out / runs.RESULTS).exists() and len((out / runs.RESULTS).read_text().splitlines()) >= 2)
    finally:
        os.kill(running.pid, signal.SIGKILL)
        running.communicate(timeout=30)
    answered = {json.loads(line)["id"] for line in (out / runs.RESULTS).read_text().splitlines() if line.endswith("}")}
    assert 2 <= len(answered) < len(ORDERS) and not (out / runs.SUMMARY).exists()

    fake_provider.reset()
    fake_provider.respond = answer
    command, env = eval_command(
        "--resume", str(out), mongo_uri=mongo_uri, fake_url=fake_provider.url, tmp_path=tmp_path
    )
    resumed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=90, check=False)  # noqa: S603

    assert resumed.returncode == 0, resumed.stderr
    asked_again = {id_ for id_, title, *_ in ORDERS if title in {title_of(r) for r in fake_provider.requests}}
    assert asked_again == {id_ for id_, *_ in ORDERS} - answered
    summary = json.loads((out / runs.SUMMARY).read_text())
    assert (summary["items"], summary["valid"], summary["accuracy"]) == (6, 5, 0.3333)
    assert "accuracy 33.3 %" in resumed.stdout and "6/6" in resumed.stderr


def test_a_bad_set_stops_the_command_naming_line_and_field(mongo_uri, fake_provider, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(write_set(tmp_path / "set.jsonl").read_text().replace('"flag": false', '"flag": "no"', 1))
    command, env = eval_command("--set", str(bad), mongo_uri=mongo_uri, fake_url=fake_provider.url, tmp_path=tmp_path)

    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=90, check=False)  # noqa: S603

    assert done.returncode == 1
    assert done.stderr.strip() == f"desk: {bad} line 2: flag: Input should be a valid boolean"
    assert fake_provider.requests == []


def test_it_runs_beside_a_desk_running_on_the_embedded_database(fake_provider, tmp_path):
    fake_provider.respond = answer
    data = tmp_path / "data"
    with EmbeddedMongo(data / "mongo") as uri, MongoClient(uri) as client:  # the running desk's server
        command = [sys.executable, "-m", "desk", "eval", "triage", "--set", str(write_set(tmp_path / "set.jsonl"))]
        env = desk_env(DESK_DATA_DIR=str(data), AI_BASE_URL=fake_provider.url, AI_API_KEY="k")
        env["AI_ALLOW_PRIVATE_BASE_URL"] = "true"
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=90, check=False)  # noqa: S603
        spent = {doc["_id"].rsplit(":", 1)[0] for doc in client["desk"]["agent_spend"].find({"spentUsd": {"$gt": 0}})}

    assert done.returncode == 0, done.stderr
    assert spent == {"agent:eval", "global"}  # billed in the desk's own ledger
    (run,) = (data / "evals").iterdir()  # where the agents page looks
    assert json.loads((run / runs.SUMMARY).read_text())["items"] == len(ORDERS)
