"""Who is acting: a person (with a role) or the system (with one capability)."""

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Literal, get_args


class Role(StrEnum):
    ADMIN = "admin"
    USER = "user"
    VIEWER = "viewer"


# What an API token may be used for, chosen when it is made: GET to read, other methods to write, admin for
# /api/v1/admin/ (desk.http.scopes_needed). A browser session has every scope its person's role allows.
Scope = Literal["read", "write", "admin"]
SCOPES: tuple[Scope, ...] = get_args(Scope)


def scopes_of(role: Role) -> frozenset[Scope]:
    """Every scope a person of `role` may hold: admin only for admins."""
    return frozenset(SCOPES if role == Role.ADMIN else ("read", "write"))


@dataclass(frozen=True, slots=True)
class Actor:
    """The principal a service call runs as. Humans come from the database; `system` carries a capability."""

    id: str
    role: Role | None
    kind: Literal["human", "system"] = "human"
    capability: Literal["triage"] | None = None
    by_token: bool = False  # came with an API token, not a browser session: it may not reset a password
    scopes: frozenset[Scope] | None = None  # a token's; None: every scope the role allows (a browser session)
    logged_in_at: datetime | None = None  # when the browser session logged in; None for a token or the system

    @property
    def is_human(self) -> bool:
        return self.kind == "human"

    @property
    def is_admin(self) -> bool:
        return self.kind == "human" and self.role == Role.ADMIN

    @property
    def can_write(self) -> bool:
        return self.kind == "human" and self.role in (Role.ADMIN, Role.USER)


SYSTEM_TRIAGE = Actor(id="system", role=None, kind="system", capability="triage")
