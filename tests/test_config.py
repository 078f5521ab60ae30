"""Configuration: a bad value stops the process with one readable line per problem, naming the key."""

import logging
import subprocess
import sys

import pytest
from pydantic import ValidationError

from desk.config import Settings, check_base_url, load_settings, settings_errors

PUBLIC_IP = "93.184.216.34"  # an IP literal: resolving it needs no network


def _boot(env: dict[str, str]) -> subprocess.CompletedProcess:
    code = "from desk.config import load_settings; load_settings(); print('booted')"
    return subprocess.run(  # noqa: S603 - our own interpreter
        [sys.executable, "-c", code], env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True, check=False
    )


def test_defaults_boot_without_any_ai_keys():
    result = _boot({})
    assert result.returncode == 0 and "booted" in result.stdout


def test_bad_values_exit_2_with_one_line_per_problem_and_no_traceback():
    result = _boot({"DESK_PORT": "eighty", "AI_MAX_STEPS_PER_RUN": "0", "AGENT_TRIAGE_MODE": "yolo"})

    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("config error: DESK_PORT:")
    assert any(line.startswith("config error: AI_MAX_STEPS_PER_RUN:") for line in lines)
    assert any(line.startswith("config error: AGENT_TRIAGE_MODE:") for line in lines)
    assert "Traceback" not in result.stderr


def test_ai_enabled_needs_its_keys():
    result = _boot({"AI_ENABLED": "true"})
    assert result.returncode == 2
    assert "AI_BASE_URL is required when AI_ENABLED=true" in result.stderr


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://93.184.216.34/v1", "must use https"),
        ("https://127.0.0.1/v1", "private, loopback or link-local"),
        ("https://10.1.2.3/v1", "private, loopback or link-local"),
        ("https://169.254.169.254/latest", "private, loopback or link-local"),
        ("https://[::1]/v1", "private, loopback or link-local"),
        ("ftp://93.184.216.34/", "absolute https URL"),
        ("https://does-not-exist.invalid/v1", "does not resolve"),
        ("https://desk:secret@93.184.216.34/v1", "must not carry a user, password, query"),
        ("https://93.184.216.34/v1?api-version=2024", "must not carry a user, password, query"),
        ("https://93.184.216.34/v1#models", "must not carry a user, password, query"),
        ("https://:secret@93.184.216.34/v1", "must not carry a user, password, query"),
        ("https://93.184.216.34/v1?", "must not carry a user, password, query"),
        ("https://93.184.216.34/v1#", "must not carry a user, password, query"),
    ],
)
def test_ai_base_url_is_checked_at_boot(url, message):
    with pytest.raises(ValueError, match=message):
        check_base_url(url, allow_private=False)


def test_a_public_https_url_is_accepted():
    check_base_url(f"https://{PUBLIC_IP}/v1", allow_private=False)


def test_a_private_model_server_needs_the_explicit_switch_and_is_logged(caplog):
    with caplog.at_level(logging.WARNING):
        settings = load_settings(
            ai_enabled=True, ai_base_url="http://127.0.0.1:8001/v1", ai_api_key="k", ai_allow_private_base_url=True
        )
    assert settings.ai_enabled
    assert "AI_ALLOW_PRIVATE_BASE_URL" in caplog.text


def test_the_api_key_never_shows_in_settings_output():
    settings = Settings(ai_enabled=False, ai_api_key="sk-very-secret-key-1234")
    assert "sk-very-secret-key-1234" not in repr(settings)
    assert "sk-very-secret-key-1234" not in str(settings.model_dump())


@pytest.mark.parametrize("proxies", ["*", "nginx", "10.0.0.5,", ""])
def test_forwarded_allow_ips_names_proxies_by_address_never_anyone(proxies):
    # "*" would believe a forged X-Forwarded-For from any client; a host name is never the peer uvicorn compares
    result = _boot({"FORWARDED_ALLOW_IPS": proxies})
    assert result.returncode == 2
    assert result.stderr == (
        "config error: FORWARDED_ALLOW_IPS: must be the proxies' addresses or CIDR networks, "
        "comma-separated (10.0.0.5)\n"
    )


def test_forwarded_allow_ips_is_unset_by_default_and_takes_addresses_and_networks():
    assert Settings().forwarded_allow_ips is None
    assert Settings(forwarded_allow_ips="172.30.80.10, 10.0.0.0/8,::1").forwarded_allow_ips is not None


def test_the_provider_timeouts_default_to_5_30_and_120_seconds():
    settings = Settings()
    assert (settings.ai_timeout_connect_s, settings.ai_timeout_read_s, settings.ai_timeout_total_s) == (5, 30, 120)
    assert Settings(ai_timeout_read_s="300", ai_timeout_total_s="900").ai_timeout_read_s == 300


def test_bad_provider_timeouts_exit_2_naming_each_key():
    result = _boot({"AI_TIMEOUT_CONNECT_S": "soon", "AI_TIMEOUT_READ_S": "0", "AI_TIMEOUT_TOTAL_S": "7200"})

    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert [line.split(":")[1].strip() for line in lines] == [
        "AI_TIMEOUT_CONNECT_S",
        "AI_TIMEOUT_READ_S",
        "AI_TIMEOUT_TOTAL_S",
    ]
    assert "Traceback" not in result.stderr


def test_a_whole_call_shorter_than_its_connect_timeout_is_refused():
    result = _boot({"AI_TIMEOUT_CONNECT_S": "10", "AI_TIMEOUT_TOTAL_S": "5"})
    assert result.returncode == 2
    assert "AI_TIMEOUT_TOTAL_S must be at least AI_TIMEOUT_CONNECT_S" in result.stderr


@pytest.mark.parametrize("proxy", ["proxy.internal:3128", "ftp://proxy.internal", "http://proxy:port", "http://p/x?y"])
def test_https_proxy_must_be_a_proxy_url(proxy):
    result = _boot({"HTTPS_PROXY": proxy})
    assert result.returncode == 2
    assert result.stderr == "config error: HTTPS_PROXY: must be a proxy URL such as http://proxy.internal:3128\n"


def test_https_proxy_is_read_in_either_case_and_its_password_is_kept_out_of_sight():
    assert _boot({"https_proxy": "http://proxy.internal:3128"}).returncode == 0
    settings = Settings(https_proxy="http://desk:proxy-pass-77@proxy.internal:3128")
    assert "proxy-pass-77" not in repr(settings)
    assert "proxy-pass-77" in settings.secrets()  # the logs redact it
    assert Settings(https_proxy="").https_proxy is None


# --- email (desk/notifications) ---

MAIL = {"DESK_MAIL_FROM": "desk@example.com", "DESK_PUBLIC_URL": "https://desk.example.com"}


def test_no_smtp_url_means_no_email():
    settings = Settings()
    assert not settings.mail_enabled and settings.desk_mail_batch_seconds == 300
    assert not Settings(desk_smtp_url="").mail_enabled  # set but empty, as compose files leave it


@pytest.mark.parametrize(
    ("url", "host", "port", "tls", "starttls", "user", "password"),
    [
        ("smtp://relay.office.lan", "relay.office.lan", 25, False, False, None, None),
        ("smtp://relay.office.lan:2525?starttls=true", "relay.office.lan", 2525, False, True, None, None),
        ("smtp://desk:p%40ss@relay.office.lan?starttls=true", "relay.office.lan", 587, False, True, "desk", "p@ss"),
        ("smtps://desk:secret@smtp.example.com", "smtp.example.com", 465, True, False, "desk", "secret"),
    ],
)
def test_smtp_urls_name_the_server_and_how_to_reach_it(url, host, port, tls, starttls, user, password):
    target = Settings(desk_smtp_url=url, desk_mail_from="desk@example.com", desk_public_url="https://d.example").smtp()
    assert (target.host, target.port, target.tls, target.starttls) == (host, port, tls, starttls)
    assert (target.user, target.password) == (user, password)
    assert password is None or password not in repr(target)


def test_the_smtp_password_is_redacted_from_the_logs_and_never_printed():
    mail = {key.lower(): value for key, value in MAIL.items()}
    settings = Settings(desk_smtp_url="smtps://desk:k9%3Dq7z@smtp.example.com", **mail)
    assert {"k9%3Dq7z", "k9=q7z"} <= set(settings.secrets())
    assert "q7z" not in repr(settings)


@pytest.mark.parametrize(
    "url",
    [
        "http://relay.office.lan",
        "smtp://",
        "smtp://relay.office.lan:port",
        "smtp://relay.office.lan/path",
        "smtp://relay.office.lan?tls=yes",
        "smtp://relay.office.lan?starttls=maybe",
        "smtps://relay.office.lan?starttls=true",
        "smtp://relay.office.lan",  # a login (the test puts one in every URL) over plain SMTP: the password in clear
    ],
)
def test_a_bad_smtp_url_stops_the_boot_without_quoting_it(url):
    result = _boot({"DESK_SMTP_URL": url.replace("relay", "me:hunter2@relay"), **MAIL})
    assert result.returncode == 2 and result.stderr.startswith("config error: DESK_SMTP_URL:")
    assert "hunter2" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_email_needs_a_sender_and_the_desks_address():
    result = _boot({"DESK_SMTP_URL": "smtp://relay.office.lan"})
    assert result.returncode == 2 and "DESK_MAIL_FROM is required with DESK_SMTP_URL" in result.stderr
    result = _boot({"DESK_SMTP_URL": "smtp://relay.office.lan", "DESK_MAIL_FROM": "desk@example.com"})
    assert result.returncode == 2 and "DESK_PUBLIC_URL is required with DESK_SMTP_URL" in result.stderr


def test_bad_mail_values_name_their_keys():
    env = {"DESK_MAIL_FROM": "not an address", "DESK_PUBLIC_URL": "desk.example.com", "DESK_MAIL_BATCH_SECONDS": "0"}
    lines = _boot(env).stderr.strip().splitlines()
    assert sorted(line.split(":")[1].strip() for line in lines) == [
        "DESK_MAIL_BATCH_SECONDS",
        "DESK_MAIL_FROM",
        "DESK_PUBLIC_URL",
    ]


def test_the_attachment_limit_is_a_size_in_megabytes():
    assert Settings().desk_max_attachment_mb == 10
    assert Settings(desk_max_attachment_mb="25").desk_max_attachment_mb == 25
    for wrong in ("0", "101", "ten"):
        with pytest.raises(ValidationError) as refused:
            Settings(desk_max_attachment_mb=wrong)
        assert [line.split(":")[0] for line in settings_errors(refused.value)] == ["DESK_MAX_ATTACHMENT_MB"]


def test_the_triage_asks_for_a_strict_tool_unless_structured_output_says_otherwise():
    assert Settings().ai_structured_output == "tool"
    assert Settings(ai_structured_output="json_object").ai_structured_output == "json_object"
    with pytest.raises(ValidationError) as refused:
        Settings(ai_structured_output="grammar")
    assert settings_errors(refused.value) == [
        "AI_STRUCTURED_OUTPUT: Input should be 'tool', 'json_schema' or 'json_object'"
    ]
