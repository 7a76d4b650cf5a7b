"""Canonical JSON: the one byte representation that every hash in Semantic Saga is computed over.

Sorted keys, separators "," and ":", UTF-8, no ASCII escaping (docs/audit_hash.md). Floats that are whole numbers
are not normalised: callers hash what they store.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def sha256_hex(value: Any) -> str:
    return hashlib.sha256(canonical_json(value)).hexdigest()
