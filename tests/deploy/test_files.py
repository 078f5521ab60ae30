""".env.example, docker-compose.yml and its files, checked against the Settings model and each other (no Docker)."""

import ipaddress
import re
from pathlib import Path

import yaml

from desk.config import Settings

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = {name.upper(): field for name, field in Settings.model_fields.items()}
READ_BY_COMPOSE = {"MONGO_ROOT_PASSWORD", "MONGO_DESK_PASSWORD"}  # in .env.example, not in Settings
LINE = re.compile(r"^(# )?([A-Z][A-Z0-9_]*)=(.*)$")
INTERPOLATED = re.compile(r"\$\{([A-Z][A-Z0-9_]*)(:?[-?][^}]*)?\}")  # ${KEY}, ${KEY:-default}, ${KEY:?message}


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

    assert set(example) == set(SETTINGS) | READ_BY_COMPOSE
    for key, (is_set, value, comment) in example.items():
        assert comment, f"{key} has no line saying what it means"
        if key in READ_BY_COMPOSE:
            assert not is_set, f"{key} has no default: leave it commented out"
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
    assert services["worker"]["command"] == ["desk", "worker"]
    assert "./deploy/nginx.conf:/etc/nginx/conf.d/default.conf:ro" in services["nginx"]["volumes"]


def test_the_worker_gets_every_ai_and_agent_setting_the_triage_reads():
    worker = _compose()["services"]["worker"]["environment"]
    wanted = {key for key in SETTINGS if key.startswith(("AI_", "AGENT_"))}
    assert wanted <= set(worker)


def test_web_and_worker_both_get_the_mail_settings():
    services = _compose()["services"]
    wanted = {"DESK_SMTP_URL", "DESK_MAIL_FROM", "DESK_PUBLIC_URL", "DESK_MAIL_BATCH_SECONDS"}
    assert wanted <= set(services["web"]["environment"]) and wanted <= set(services["worker"]["environment"])


def test_every_key_compose_reads_or_gives_the_desk_is_in_env_example():
    example = set(_example())
    for name in ("web", "worker"):
        unknown = set(_compose()["services"][name]["environment"]) - example
        assert not unknown, f"{name} sets keys .env.example does not list: {sorted(unknown)}"
    read = {match[0] for match in INTERPOLATED.findall((ROOT / "docker-compose.yml").read_text())}
    assert read - example == set(), "compose reads keys from .env that .env.example does not list"
    assert read >= READ_BY_COMPOSE


def test_compose_runs_mongodb_with_a_password_and_the_desk_as_a_user_of_its_own_database_alone():
    services = _compose()["services"]
    mongo = services["mongo"]["environment"]
    init = (ROOT / "deploy" / "mongo-init" / "desk-user.js").read_text()

    # a root user makes the image start mongod with --auth; its password has no default, compose refuses without
    assert mongo["MONGO_INITDB_ROOT_USERNAME"] == "root"
    assert re.fullmatch(r"\$\{MONGO_ROOT_PASSWORD:\?[^}]+\}", mongo["MONGO_INITDB_ROOT_PASSWORD"])
    assert re.fullmatch(r"\$\{MONGO_DESK_PASSWORD:\?[^}]+\}", mongo["MONGO_DESK_PASSWORD"])
    assert "./deploy/mongo-init:/docker-entrypoint-initdb.d:ro" in services["mongo"]["volumes"]
    # the init script makes the desk's user with read and write on the desk's database, and no other role
    assert 'const database = process.env.MONGODB_DB || "desk";' in init
    assert "const password = process.env.MONGO_DESK_PASSWORD;" in init
    (roles,) = re.findall(r"roles: (\[.*?\])", init)
    assert roles == '[{ role: "readWrite", db: database }]'
    assert mongo["MONGODB_DB"] == "${MONGODB_DB:-desk}"
    # every desk process logs in as that user, on that database
    for name in ("web", "worker"):
        env = services[name]["environment"]
        assert env["MONGODB_URI"].startswith("mongodb://desk:${MONGO_DESK_PASSWORD:?")
        assert env["MONGODB_URI"].endswith("@mongo:27017/?authSource=${MONGODB_DB:-desk}")
        assert env["MONGODB_DB"] == mongo["MONGODB_DB"]


def test_the_worker_is_healthy_only_while_its_heartbeat_is_fresh():
    check = _compose()["services"]["worker"]["healthcheck"]
    assert check["test"] == ["CMD", "desk", "worker", "--check"]  # tests/test_worker.py runs it for real


def test_the_web_processes_believe_the_forwarded_address_from_nginx_alone():
    compose = _compose()
    nginx = compose["services"]["nginx"]["networks"]["default"]["ipv4_address"]
    (subnet,) = compose["networks"]["default"]["ipam"]["config"]

    assert compose["services"]["web"]["environment"]["FORWARDED_ALLOW_IPS"] == nginx
    assert ipaddress.ip_address(nginx) in ipaddress.ip_network(subnet["subnet"])
    # nginx sets the header from the TCP peer: a forged one from outside is replaced, never appended to
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in (ROOT / "deploy" / "nginx.conf").read_text()


def test_only_nginx_publishes_a_port_and_never_the_database():
    services = _compose()["services"]
    published = {name for name, service in services.items() if service.get("ports")}
    assert published == {"nginx"}
    assert not any("27017" in str(port) for service in services.values() for port in service.get("ports", []))
    assert "expose" not in services["mongo"] and "network_mode" not in services["mongo"]


def test_readme_configuration_table_lists_every_setting_with_its_default():
    table = (ROOT / "README.md").read_text().split("## Configuration", 1)[1].split("\n## ", 1)[0]
    listed: dict[str, str] = {}
    for row in table.splitlines():
        cells = [cell.strip() for cell in row.strip("|").split("|")] if row.startswith("| `") else []
        if not cells:
            continue
        keys = re.findall(r"`([A-Z][A-Z0-9_]*)`", cells[0])
        defaults = cells[1].split(" / ")
        for key, default in zip(keys, defaults if len(defaults) == len(keys) else [cells[1]] * len(keys), strict=True):
            assert key not in listed, f"{key} twice in README's table"
            listed[key] = default

    assert set(listed) == set(SETTINGS), "README's configuration table and Settings differ"
    for key, default in listed.items():
        expected = SETTINGS[key].default
        if expected is None:  # unset by default: the table says so in words (unset, generated, —)
            assert not default.startswith("`"), f"{key} is unset by default, README says {default}"
            continue
        assert default.startswith("`"), f"{key}: README shows no default, Settings has {expected!r}"
        read = Settings.model_validate({key.lower(): default.strip("`")})
        assert getattr(read, key.lower()) == expected, f"{key}: README says {default}, Settings {expected!r}"
