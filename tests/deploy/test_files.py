""".env.example and docker-compose.yml, checked against the Settings model (no Docker engine runs here)."""

import re
from pathlib import Path

import yaml

from desk.config import Settings

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = {name.upper(): field for name, field in Settings.model_fields.items()}
READ_BY_UVICORN = {"FORWARDED_ALLOW_IPS"}  # in .env.example, not in Settings
LINE = re.compile(r"^(# )?([A-Z][A-Z0-9_]*)=(.*)$")


def _example() -> dict[str, tuple[bool, str, str]]:
    """KEY -> (set, value, the comment lines above it), from .env.example."""
    keys: dict[str, tuple[bool, str, str]] = {}
    comment: list[str] = []
    for line in (ROOT / ".env.example").read_text().splitlines():
        if match := LINE.match(line):
            commented, key, value = match.groups()
            assert key not in keys, f"{key} twice in .env.example"
            keys[key] = (not commented, value, " ".join(comment))
        elif line.startswith("# "):
            comment = [*comment, line]
        else:
            comment = []
    return keys


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_env_example_lists_every_setting_with_its_default_and_a_meaning():
    example = _example()

    assert set(example) == set(SETTINGS) | READ_BY_UVICORN
    for key, (is_set, value, comment) in example.items():
        assert comment, f"{key} has no line saying what it means"
        if key in READ_BY_UVICORN:
            continue
        default = SETTINGS[key].default
        if default is None:
            assert not is_set, f"{key} is unset by default: leave it commented out"
            continue
        assert is_set, f"{key} defaults to {default!r}: show it set"
        # the value as the desk reads it from the environment equals the model's default
        read = Settings.model_validate({key.lower(): value})
        assert getattr(read, key.lower()) == default, f"{key}={value} in .env.example, default {default!r}"


def test_compose_runs_mongo_web_processes_without_their_own_worker_a_worker_and_nginx():
    services = _compose()["services"]

    assert set(services) == {"mongo", "web", "worker", "nginx"}
    assert services["web"]["environment"]["DESK_RUN_WORKER"] == "false"
    assert services["web"]["deploy"]["replicas"] >= 2
    assert services["worker"]["command"] == ["python", "/src/scheduler.py"]
    assert "./deploy/nginx.conf:/etc/nginx/conf.d/default.conf:ro" in services["nginx"]["volumes"]


def test_the_worker_gets_every_ai_and_agent_setting_the_triage_reads():
    worker = _compose()["services"]["worker"]["environment"]
    wanted = {key for key in SETTINGS if key.startswith(("AI_", "AGENT_"))}
    assert wanted <= set(worker)


def test_every_compose_environment_key_is_in_env_example():
    example = set(_example())
    for name, service in _compose()["services"].items():
        unknown = set(service.get("environment") or {}) - example
        assert not unknown, f"{name} sets keys .env.example does not list: {sorted(unknown)}"


def test_only_nginx_publishes_a_port_and_never_the_database():
    services = _compose()["services"]
    published = {name for name, service in services.items() if service.get("ports")}
    assert published == {"nginx"}
    assert "expose" not in services["mongo"] and "network_mode" not in services["mongo"]
