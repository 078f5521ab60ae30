"""Password hashing (argon2id) and the password policy."""

import asyncio
import re
import unicodedata
from functools import cache
from importlib.resources import files

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from desk.errors import ValidationFailed
from desk.schema import BLANK, BMP, char_class

MIN_LENGTH = 12  # ASVS 4.0 2.1.1
MAX_LENGTH = 128
# What people put around a word to pass a length rule: ASCII digits, punctuation and space ("password1234").
PADDING = "0-9 !-/:-@\\[-`{-~"
PADDED_WORDS = 100  # the most common passwords' words, refused with any padding around them

# OWASP's minimum for argon2id: 19 MiB of memory, 2 iterations, 1 lane.
_hasher = PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)
# Verified when the email is unknown, so a wrong email costs as long as a wrong password.
_DUMMY_HASH = _hasher.hash("not a real password, only for equal timing")


@cache
def _common_passwords() -> tuple[str, ...]:
    """The list's passwords, lower-cased, most common first."""
    text = files("desk.auth").joinpath("common_passwords.txt").read_text(encoding="utf-8")
    lines = (line.strip().lower() for line in text.splitlines() if line.strip() and not line.startswith("#"))
    return tuple(dict.fromkeys(lines))


@cache
def _refused() -> str:
    """One regex for the check and the API's schema: a common password as it is; one of the most common words
    with only digits, punctuation or spaces around it ("Password1234!", "iloveyou2024"); or nothing but those.

    Case is spelled out in character classes (`_spellings`), since a JSON schema pattern takes no flags.
    """
    common = _common_passwords()
    exact = [word for word in common if MIN_LENGTH <= len(word) <= MAX_LENGTH]
    padding = re.compile(f"^[{PADDING}]+|[{PADDING}]+$")
    bases = dict.fromkeys(padding.sub("", word) for word in common)
    words = [word for word in bases if len(word) >= 5 and word.isascii() and word.isalpha()][:PADDED_WORDS]
    pad = f"[{PADDING}]"
    return f"^(?:{_alternatives(exact)}|{pad}*(?:{_alternatives(words)}){pad}*|{pad}+)$"


def _alternatives(words: list[str]) -> str:
    return "|".join("".join(f"[{char_class(_spellings(char))}]" for char in word) for word in sorted(words))


def check_policy(password: str, *, field: str = "password") -> None:
    """Raise ValidationFailed, naming `field` (the request's name for it), when the password is too short, too long,
    nothing but spaces and invisible characters, or a common one (`_refused`).

    Judged as sent (what the schema states) and in the NFKC form that is hashed: "password1234" typed in
    full-width letters is "password1234" once normalized, and ten accents sent decomposed are ten characters,
    not twenty.
    """
    forms = (password, _normalized(password))
    if min(map(len, forms)) < MIN_LENGTH:
        raise ValidationFailed(f"The password must have at least {MIN_LENGTH} characters.", details={"field": field})
    if len(password) > MAX_LENGTH:
        raise ValidationFailed(f"The password may have at most {MAX_LENGTH} characters.", details={"field": field})
    if not all(form.strip(BLANK) for form in forms):  # twelve spaces, or zero-width ones: nobody could type it back
        raise ValidationFailed(NOTHING_VISIBLE, details={"field": field})
    if any(re.fullmatch(_refused(), form) for form in forms):
        raise ValidationFailed(TOO_COMMON, details={"field": field})


NOTHING_VISIBLE = "The password must have more in it than spaces and invisible characters."
TOO_COMMON = "That password is too common (digits or symbols around a common word do not help); choose another."


def json_schema() -> dict[str, object]:
    """The policy in JSON schema, for the API's contract: the lengths, something visible, and no common password."""
    visible = f"[^{char_class(frozenset(BLANK))}]"  # somewhere in it (a JSON schema pattern searches)
    return {"minLength": MIN_LENGTH, "maxLength": MAX_LENGTH, "pattern": visible, "not": {"pattern": _refused()}}


def _spellings(char: str) -> frozenset[str]:
    """Every character whose lower case is `char` (the policy compares lower-cased passwords)."""
    return _upper_cases().get(char, frozenset()) | {char}


@cache
def _upper_cases() -> dict[str, frozenset[str]]:
    """Each lower case and the characters that lower to it: one walk of the BMP, not one per letter of the list."""
    spellings: dict[str, set[str]] = {}
    for other in BMP:
        spellings.setdefault(other.lower(), set()).add(other)
    return {lower: frozenset(chars) for lower, chars in spellings.items()}


def _normalized(password: str) -> str:
    """NFKC, as NIST SP 800-63B asks: "é" typed as one character or as "e" and its accent, or a letter typed
    full-width, is the same password whichever keyboard or system typed it."""
    return unicodedata.normalize("NFKC", password)


async def hash_password(password: str) -> str:
    """An argon2id hash of the password's normal form, computed off the event loop."""
    return await asyncio.to_thread(_hasher.hash, _normalized(password))


async def verify_password(password_hash: str | None, password: str) -> bool:
    """True when `password` matches; with no hash, spends the same time and answers False."""
    # A hash made before passwords were normalized is of the password as typed then: tried second.
    tries = dict.fromkeys((_normalized(password), password))

    def verify() -> bool:
        for typed in tries:
            try:
                if _hasher.verify(password_hash or _DUMMY_HASH, typed) and password_hash is not None:
                    return True
            except (VerificationError, InvalidHashError):
                continue
        return False

    return await asyncio.to_thread(verify)
