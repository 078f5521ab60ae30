"""Who is acting: a person (with a role) or the system (with one capability)."""

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal


class Role(StrEnum):
    ADMIN = "admin"
    USER = "user"
    VIEWER = "viewer"


@dataclass(frozen=True, slots=True)
class Actor:
    """The principal a service call runs as. Humans come from the database; `system` carries a capability."""

    id: str
    role: Role | None
    kind: Literal["human", "system"] = "human"
    capability: Literal["triage"] | None = None
    by_token: bool = False  # came with an API token, not a browser session: it may not reset a password

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
