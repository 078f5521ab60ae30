"""Settings: every environment key the desk reads, validated once at boot."""

import ipaddress
import logging
import re
import socket
import sys
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import parse_qs, unquote, urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from desk import hours, state

log = logging.getLogger(__name__)

PositiveInt = Annotated[int, Field(gt=0)]
Usd = Annotated[float, Field(ge=0)]
Seconds = Annotated[float, Field(gt=0, le=3600)]


class Settings(BaseSettings):
    """The whole configuration; names match the environment keys (case-insensitive)."""

    model_config = SettingsConfigDict(extra="ignore", case_sensitive=False, frozen=True)

    # Storage and serving
    mongodb_uri: SecretStr | None = None  # unset: start the embedded server under desk_data_dir
    mongodb_db: str = Field("desk", pattern=r"^[A-Za-z0-9_-]{1,63}$")
    desk_data_dir: Path = Path("data")
    desk_host: str = "127.0.0.1"
    desk_port: int = Field(8080, ge=1, le=65535)
    desk_secret: SecretStr | None = Field(None, min_length=32)  # unset: generated once into desk_data_dir
    desk_admin_email: str | None = None
    desk_admin_password: SecretStr | None = None
    desk_public_https: bool = False  # true behind https: Secure + __Host- session cookie
    desk_run_worker: bool = True  # `desk run` starts its own worker; false where worker services run the jobs
    desk_metrics_allow: str = "127.0.0.1/32,::1/128"  # who may read /metrics: CIDRs, comma-separated; empty: no one
    # The reverse proxies whose X-Forwarded-For is believed: addresses or CIDRs, comma-separated. Unset: none,
    # every client's address is its TCP peer's (uvicorn alone would believe any loopback client).
    forwarded_allow_ips: str | None = None

    # Sessions and login
    desk_session_idle_minutes: PositiveInt = 120
    desk_session_max_hours: PositiveInt = 12
    desk_login_attempts_per_minute: PositiveInt = 10
    desk_login_free_failures: PositiveInt = 3  # per email and address, before each further try waits longer
    desk_writes_per_minute: PositiveInt = 60  # orders, comments (and uploads) one person writes in any 60 s
    # the largest file one may attach to an order, in MB (MiB); a request body may carry this much and a little more
    desk_max_attachment_mb: int = Field(10, ge=1, le=100)

    # Email (docs/product.md, "Notifications"; docs/operations.md, "Send email").
    # No DESK_SMTP_URL: no email is sent, and nothing else changes.
    # smtp://[user:password@]host[:port][?starttls=true] or smtps://...; hidden from repr: it may hold a password.
    desk_smtp_url: SecretStr | None = None
    desk_mail_from: str | None = None  # the From address of every email (required with DESK_SMTP_URL)
    desk_public_url: str | None = None  # the desk's address as people open it, for links in emails
    desk_mail_batch_seconds: int = Field(300, ge=1, le=86_400)  # at most one email per person and order in this long

    # AI (spec §11)
    ai_enabled: bool = False
    ai_base_url: str | None = None
    ai_api_key: SecretStr | None = None
    ai_allow_private_base_url: bool = False
    # Seconds the provider gets to take the connection, to break each silence, and to finish its whole answer.
    ai_timeout_connect_s: Seconds = 5.0
    ai_timeout_read_s: Seconds = 30.0
    ai_timeout_total_s: Seconds = 120.0
    # While the provider is unreachable, the agents probe it this often at first, doubling up to the longest.
    ai_probe_interval_ms: PositiveInt = 5_000
    ai_probe_max_interval_ms: PositiveInt = 60_000
    # An https AI_BASE_URL is called through it (desk/agent/core/egress.py); hidden from repr: it may hold a password.
    https_proxy: str | None = Field(None, repr=False)
    ai_model: str = "gpt-4o-mini"
    # How the triage asks for its schema-valid answer: a strict forced tool, or response_format (a grammar on llama.cpp)
    ai_structured_output: Literal["tool", "json_schema", "json_object"] = "tool"
    ai_max_steps_per_run: PositiveInt = 8
    ai_max_output_tokens: PositiveInt = 2048
    ai_max_context_tokens: PositiveInt = 16384
    ai_price_per_1m_input: Usd = 0.15
    ai_price_per_1m_output: Usd = 0.60
    ai_daily_spend_usd: Usd = 1.00
    agent_daily_spend_usd: Usd = 1.00
    ai_global_daily_spend_usd: Usd = 5.00
    ai_approval_ttl_ms: PositiveInt = 600_000
    ai_sse_keepalive_ms: PositiveInt = 15_000
    ai_rate_limit_max: PositiveInt = 20
    agent_poll_interval_ms: PositiveInt = 5_000
    agent_lease_ms: PositiveInt = 15_000
    agent_sweep_interval_ms: PositiveInt = 30_000
    agent_max_attempts: PositiveInt = 3
    agent_reconcile_after_ms: PositiveInt = 60_000
    agent_reconcile_max_age: timedelta = timedelta(days=7)  # AGENT_RECONCILE_MAX_AGE: 7d, 36h; older orders are history
    agent_triage_mode: Literal["suggest", "auto-apply"] = "suggest"
    agent_working_hours: str = "*"  # desk/hours.py: "*", 08:00-18:00, Mon-Fri 08:00-18:00; Sat 09:00-13:00
    agent_concurrency: int = Field(2, ge=1, le=32)  # triage passes at once across the whole desk (every worker)
    agent_time_zone: str = "UTC"  # IANA zone (e.g. Europe/Berlin) of the working hours and the spend and action days

    def secrets(self) -> list[str]:
        """Every configured secret, and the password inside MONGODB_URI, for the logs to redact (SEC-1)."""
        found = [
            value.get_secret_value()
            for value in (self.mongodb_uri, self.desk_secret, self.desk_admin_password, self.ai_api_key)
            if value is not None
        ]
        if self.mongodb_uri is not None and (password := urlsplit(self.mongodb_uri.get_secret_value()).password):
            found += [password, unquote(password)]  # as written in the URI, and as the driver sends it
        if self.desk_smtp_url is not None and (password := urlsplit(self.desk_smtp_url.get_secret_value()).password):
            found += [password, unquote(password)]
        if self.https_proxy and (password := urlsplit(self.https_proxy).password):
            found += [password, unquote(password)]  # a proxy's credentials ride in its URL
        return found

    @field_validator("desk_admin_email")
    @classmethod
    def _email_shape(cls, value: str | None) -> str | None:
        if value is not None and ("@" not in value or value.strip() != value):
            raise ValueError("must be an email address")
        return value.lower() if value else value

    @property
    def mail_enabled(self) -> bool:
        """Whether the desk sends email (DESK_SMTP_URL is set)."""
        return self.desk_smtp_url is not None

    def smtp(self) -> "SmtpTarget":
        """Where and how to send email (only when `mail_enabled`)."""
        assert self.desk_smtp_url is not None
        return smtp_target(self.desk_smtp_url.get_secret_value())

    @field_validator("desk_smtp_url")
    @classmethod
    def _smtp_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value():
            return None  # set but empty: no email
        smtp_target(value.get_secret_value())
        return value

    @field_validator("desk_mail_from")
    @classmethod
    def _mail_from(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[^@\s<>\"]+@[^@\s<>\"]+\.[^@\s<>\"]+", value):
            raise ValueError("must be an email address such as desk@example.com")
        return value

    @field_validator("desk_public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if not value:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
            raise ValueError("must be the desk's address such as https://desk.example.com")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _mail_keys(self) -> "Settings":
        if self.desk_smtp_url is None:
            return self
        if not self.desk_mail_from:
            raise ValueError("DESK_MAIL_FROM is required with DESK_SMTP_URL")
        if not self.desk_public_url:
            raise ValueError("DESK_PUBLIC_URL is required with DESK_SMTP_URL (links in emails open the desk there)")
        return self

    @field_validator("desk_metrics_allow")
    @classmethod
    def _networks(cls, value: str) -> str:
        try:
            [ipaddress.ip_network(part.strip()) for part in value.split(",") if part.strip()]
        except ValueError as error:
            raise ValueError(f"must be comma-separated CIDR networks such as 10.0.0.0/8 ({error})") from None
        return value

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _proxies(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            [ipaddress.ip_network(part.strip()) for part in value.split(",")]  # an address is a network of one
        except ValueError:
            raise ValueError("must be the proxies' addresses or CIDR networks, comma-separated (10.0.0.5)") from None
        return value

    @field_validator("https_proxy")
    @classmethod
    def _proxy_url(cls, value: str | None) -> str | None:
        if not value:
            return None  # set but empty, as shells often leave it: no proxy
        parts = urlsplit(value)
        try:
            parts.port  # noqa: B018 - raises on a port that is not a number
        except ValueError:
            raise ValueError("must be a proxy URL such as http://proxy.internal:3128") from None
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") or parts.query:
            raise ValueError("must be a proxy URL such as http://proxy.internal:3128")
        return value

    @field_validator("agent_working_hours")
    @classmethod
    def _hours(cls, value: str) -> str:
        try:
            hours.parse(value)
        except ValueError:
            raise ValueError(SHAPES["AGENT_WORKING_HOURS"]) from None
        return value

    @field_validator("agent_reconcile_max_age", mode="before")
    @classmethod
    def _age(cls, value: object) -> object:
        if isinstance(value, timedelta):
            return value
        found = re.fullmatch(r"([1-9][0-9]{0,4})(d|h)", str(value).strip())
        if found is None:
            raise ValueError(SHAPES["AGENT_RECONCILE_MAX_AGE"])
        number, unit = int(found[1]), found[2]
        return timedelta(days=number) if unit == "d" else timedelta(hours=number)

    @field_validator("agent_time_zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError("must be an IANA time zone such as Europe/Berlin") from None
        return value

    @model_validator(mode="after")
    def _ai_keys(self) -> "Settings":
        if not self.ai_enabled:
            return self
        if not self.ai_base_url:
            raise ValueError("AI_BASE_URL is required when AI_ENABLED=true")
        if self.ai_api_key is None or not self.ai_api_key.get_secret_value():
            raise ValueError("AI_API_KEY is required when AI_ENABLED=true")
        check_base_url(self.ai_base_url, allow_private=self.ai_allow_private_base_url)
        return self

    @model_validator(mode="after")
    def _timeouts(self) -> "Settings":
        if self.ai_timeout_total_s < self.ai_timeout_connect_s:
            raise ValueError("AI_TIMEOUT_TOTAL_S must be at least AI_TIMEOUT_CONNECT_S (the whole call includes it)")
        if self.ai_probe_max_interval_ms < self.ai_probe_interval_ms:
            raise ValueError("AI_PROBE_MAX_INTERVAL_MS must be at least AI_PROBE_INTERVAL_MS")
        return self


@dataclass(frozen=True)
class SmtpTarget:
    """DESK_SMTP_URL, taken apart: smtps is TLS from the start; smtp may upgrade with STARTTLS."""

    host: str
    port: int
    tls: bool
    starttls: bool
    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)


SMTP_SHAPE = "must be smtp://host:port or smtps://host:port, with user:password@ and ?starttls=true if need be"


def smtp_target(url: str) -> SmtpTarget:
    """The mail server DESK_SMTP_URL names; ValueError (never quoting the URL: it may hold a password) if none."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        raise ValueError(SMTP_SHAPE) from None
    query = parse_qs(parts.query, keep_blank_values=True)
    starttls = query.pop("starttls", ["false"])
    if parts.scheme not in ("smtp", "smtps") or not parts.hostname or parts.path not in ("", "/") or query:
        raise ValueError(SMTP_SHAPE)
    if starttls not in (["true"], ["false"]):
        raise ValueError("DESK_SMTP_URL's starttls must be true or false")
    if parts.scheme == "smtps" and starttls == ["true"]:
        raise ValueError("DESK_SMTP_URL: smtps is TLS from the start; starttls=true goes with smtp://")
    tls = parts.scheme == "smtps"
    if (parts.username or parts.password) and not tls and starttls != ["true"]:
        raise ValueError("DESK_SMTP_URL: a login needs TLS (smtps://, or smtp:// with ?starttls=true): never in clear")
    return SmtpTarget(
        host=parts.hostname,
        port=port or (465 if tls else 587 if starttls == ["true"] else 25),
        tls=tls,
        starttls=starttls == ["true"],
        user=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
    )


def check_base_url(url: str, *, allow_private: bool) -> None:
    """SEC-2: https only, and the host must not resolve to a private, loopback or link-local address.

    Also nothing but scheme, host, port and path: the key goes in AI_API_KEY, and the client appends
    `/chat/completions` to the URL as written.
    """
    parts = urlsplit(url)
    if not parts.hostname or parts.scheme not in ("https", "http"):
        raise ValueError("AI_BASE_URL must be an absolute https URL")
    if "@" in parts.netloc or "?" in url or "#" in url:  # even an empty query or fragment breaks the path
        # httpx would send credentials in the URL as Basic auth instead of the key, and the path
        # `/chat/completions` is appended to the URL as written, so a query would swallow it.
        raise ValueError("AI_BASE_URL must not carry a user, password, query or fragment (the key goes in AI_API_KEY)")
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or 443, proto=socket.IPPROTO_TCP)
    except OSError:
        raise ValueError(f"AI_BASE_URL host {parts.hostname!r} does not resolve") from None
    addresses = {ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos}
    internal = any(not a.is_global for a in addresses)
    if internal and not allow_private:
        raise ValueError(
            "AI_BASE_URL resolves to a private, loopback or link-local address; "
            "set AI_ALLOW_PRIVATE_BASE_URL=true for a self-hosted model"
        )
    if parts.scheme == "http" and not (internal and allow_private):
        raise ValueError(
            "AI_BASE_URL must use https (plain http only for a private host with AI_ALLOW_PRIVATE_BASE_URL)"
        )
    if internal:
        log.warning("AI_BASE_URL points at a private address; allowed by AI_ALLOW_PRIVATE_BASE_URL")


# What a value must look like, in words with an example, where pydantic would quote a regular expression.
SHAPES = {
    "MONGODB_DB": "must be 1 to 63 letters, digits, '_' or '-', for example desk or desk_staging",
    "AGENT_WORKING_HOURS": (
        "must be * (any time) or a 24-hour range such as 08:00-18:00 (ending at another time),"
        " after weekdays if need be: Mon-Fri 08:00-18:00"
    ),
    "AGENT_RECONCILE_MAX_AGE": "must be a number of days or hours such as 7d or 36h",
}


def settings_errors(error: ValidationError) -> list[str]:
    """One readable line per problem, naming the environment key, in plain words (never the value: it may be secret)."""
    lines = []
    for item in error.errors():
        key = "_".join(str(part) for part in item["loc"]).upper() or "CONFIG"
        message = _plain_words(key, item)
        lines.append(f"{key}: {message}" if item["loc"] else message)
    return lines


def _plain_words(key: str, item) -> str:
    ctx = item.get("ctx") or {}
    match item["type"]:
        case "too_short" | "string_too_short":
            return f"must be at least {ctx.get('min_length')} characters long"
        case "too_long" | "string_too_long":
            return f"must be at most {ctx.get('max_length')} characters long"
        case "string_pattern_mismatch":
            return SHAPES.get(key, "is not in the expected form")
        case "int_parsing":
            return "must be a whole number"
    return item["msg"].removeprefix("Value error, ")


def load_settings(**overrides: object) -> Settings:
    """Read the environment once; on bad values print one line per problem and exit with status 2."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as error:
        for line in settings_errors(error):
            print(f"config error: {line}", file=sys.stderr)
        raise SystemExit(2) from None


def get_settings() -> Settings:
    """The process's settings (its `Desk`'s), loaded from the environment on first use."""
    return state.current().settings


def use_settings(settings: Settings | None) -> None:
    """Replace the process's settings (the CLI after parsing flags; tests); None forgets the whole Desk."""
    desk = state.peek()
    if settings is None:
        state.install(None)
    elif desk is None:
        state.install(state.Desk(settings))
    else:
        desk.settings = settings
