"""Ids a person types: the whole UUID, a unique prefix of it, or a unique suffix (Sagaz shows and accepts the last 8
characters of an id, `sagaz approve 78HJNT9Q`; git users type a prefix). One resolution for every command that
names a session or a held call (sagas.selectors.proxy_sessions.proxy_session and held_call_node),
always inside the caller's tenant-scoped queryset: another tenant's rows are never candidates, so a short id can
neither reach nor reveal them.

A short id matching several rows is refused with the candidates listed (type more characters); one matching none is
the caller's usual not-found.
"""

from __future__ import annotations

import re
import uuid
from typing import TypeVar

from django.db.models import Model, Q, QuerySet

from sagas.errors import InvalidInput
from sagas.selectors.scope import parse_uuid

M = TypeVar("M", bound=Model)

# What `pending` shows and a Sagaz user types: the id's last 8 characters (32 random bits of a UUID4).
SHORT_ID_CHARS = 8
# Fewer hex digits than this name nothing: too many rows would match, and a typo would pick one by chance.
SHORT_ID_MIN_CHARS = 4
# Candidates named in an ambiguity error; more are counted, not listed.
LISTED_CANDIDATES = 5
_HEX = re.compile(r"^[0-9a-f-]+$")
_GROUPS = (8, 4, 4, 4, 12)  # the hex digits of each hyphen-separated group of a UUID's text


def short_id(value: object, chars: int = SHORT_ID_CHARS) -> str:
    """The id as `pending` shows it: its last `chars` characters."""
    return str(value)[-chars:]


def resolve(rows: QuerySet[M], ref: str, *, noun: str, missing: Exception) -> M:
    """The one row of `rows` whose id is `ref`, starts with it or ends with it. `missing` is raised for none;
    InvalidInput (AMBIGUOUS_ID, naming the candidates) for several; InvalidInput (ID_TOO_SHORT) below the minimum."""
    text = ref.strip().lower()
    whole = parse_uuid(text)
    if whole is not None:
        found = rows.filter(pk=whole).first()
        if found is None:
            raise missing
        return found
    digits = text.replace("-", "")
    if not _HEX.match(text) or not digits:
        raise missing
    if len(digits) < SHORT_ID_MIN_CHARS:
        raise InvalidInput(
            "ID_TOO_SHORT",
            f"{ref!r} is too short to name a {noun}: type at least {SHORT_ID_MIN_CHARS} characters of its id "
            f"(the {SHORT_ID_CHARS} shown are enough).",
        )
    matches = list(rows.filter(_matching(digits)).order_by("pk")[: LISTED_CANDIDATES + 1])
    if not matches:
        raise missing
    if len(matches) > 1:
        raise _ambiguous(rows, ref, digits, noun, matches)
    return matches[0]


def shortest_unique(rows: QuerySet[M], value: uuid.UUID | str) -> str:
    """The shortest suffix of `value`, from SHORT_ID_CHARS characters up, that names it alone among `rows`."""
    text = str(value)
    for chars in (SHORT_ID_CHARS, 12, 17):
        suffix = short_id(text, chars)
        if rows.filter(_matching(suffix.replace("-", ""), prefix=False)).count() <= 1:
            return suffix
    return text


def _matching(digits: str, *, prefix: bool = True) -> Q:
    """Ids starting (when `prefix`) or ending with these hex digits. The digits are hyphenated where the UUID's text
    has hyphens, so the pattern matches on PostgreSQL (a uuid compared as its hyphenated text) as on SQLite (where
    Django compares the 32 digits and drops the hyphens itself)."""
    ends = Q(pk__endswith=_hyphenated(digits, from_end=True))
    return Q(pk__startswith=_hyphenated(digits, from_end=False)) | ends if prefix else ends


def _hyphenated(digits: str, *, from_end: bool) -> str:
    groups = _GROUPS[::-1] if from_end else _GROUPS
    source = digits[::-1] if from_end else digits
    parts, at = [], 0
    for size in groups:
        if at >= len(source):
            break
        parts.append(source[at : at + size])
        at += size
    text = "-".join(parts)
    return text[::-1] if from_end else text


def _ambiguous(rows: QuerySet[M], ref: str, digits: str, noun: str, matches: list[M]) -> InvalidInput:
    listed = ", ".join(str(row.pk) for row in matches[:LISTED_CANDIDATES])
    more = ""
    if len(matches) > LISTED_CANDIDATES:
        more = f" and {rows.filter(_matching(digits)).count() - LISTED_CANDIDATES} more"
    return InvalidInput(
        "AMBIGUOUS_ID",
        f"{ref!r} names more than one {noun}: {listed}{more}. Type more characters of the id (or the whole id).",
    )
