"""Password hashing (argon2id) and the password policy."""

import asyncio
from functools import cache
from importlib.resources import files

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from desk.errors import ValidationFailed
from desk.schema import BLANK, BMP, char_class

MIN_LENGTH = 12  # ASVS 4.0 2.1.1
MAX_LENGTH = 128

# OWASP's minimum for argon2id: 19 MiB of memory, 2 iterations, 1 lane.
_hasher = PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)
# Verified when the email is unknown, so a wrong email costs as long as a wrong password.
_DUMMY_HASH = _hasher.hash("not a real password, only for equal timing")


@cache
def _common_passwords() -> frozenset[str]:
    text = files("desk.auth").joinpath("common_passwords.txt").read_text(encoding="utf-8")
    return frozenset(line.strip().lower() for line in text.splitlines() if line.strip() and not line.startswith("#"))


def check_policy(password: str, *, field: str = "password") -> None:
    """Raise ValidationFailed, naming `field` (the request's name for it), when the password is too short, too long,
    nothing but spaces and invisible characters, or among the most common ones."""
    if len(password) < MIN_LENGTH:
        raise ValidationFailed(f"The password must have at least {MIN_LENGTH} characters.", details={"field": field})
    if len(password) > MAX_LENGTH:
        raise ValidationFailed(f"The password may have at most {MAX_LENGTH} characters.", details={"field": field})
    if not password.strip(BLANK):  # twelve spaces, or zero-width ones: nobody could see or type it back
        raise ValidationFailed(NOTHING_VISIBLE, details={"field": field})
    if password.lower() in _common_passwords():
        raise ValidationFailed("That password is too common; choose another.", details={"field": field})


NOTHING_VISIBLE = "The password must have more in it than spaces and invisible characters."


def json_schema() -> dict[str, object]:
    """The policy in JSON schema, for the API's contract: the lengths, something visible, and no common password."""
    refused = sorted(word for word in _common_passwords() if MIN_LENGTH <= len(word) <= MAX_LENGTH)
    words = "|".join("".join(f"[{char_class(_spellings(char))}]" for char in word) for word in refused)
    visible = f"[^{char_class(frozenset(BLANK))}]"  # somewhere in it (a JSON schema pattern searches)
    return {"minLength": MIN_LENGTH, "maxLength": MAX_LENGTH, "pattern": visible, "not": {"pattern": f"^(?:{words})$"}}


@cache
def _spellings(char: str) -> frozenset[str]:
    """Every character whose lower case is `char` (the policy compares lower-cased passwords)."""
    return frozenset(other for other in BMP if other.lower() == char) | {char}


async def hash_password(password: str) -> str:
    """An argon2id hash, computed off the event loop."""
    return await asyncio.to_thread(_hasher.hash, password)


async def verify_password(password_hash: str | None, password: str) -> bool:
    """True when `password` matches; with no hash, spends the same time and answers False."""

    def verify() -> bool:
        try:
            return _hasher.verify(password_hash or _DUMMY_HASH, password) and password_hash is not None
        except (VerificationError, InvalidHashError):
            return False

    return await asyncio.to_thread(verify)
