"""The vocabulary of a contract's `semantic` object, ours and semantic-saga-mcp's, read as one.

A contract keeps its `semantic` exactly as its file says (the definition hash is over the file's words), and the
readers that act on it (compensation rules, governance facts, risk units) read it through these functions, so a
file written for semantic-saga-mcp means there what it meant there:

- reversibility: ours is reversible, compensable, irreversible, read_only, unknown. semantic-saga-mcp's words map
  onto them: `full` (the compensation restores the prior state) -> reversible; `configured` (its legacy files: a
  rollback request is configured) -> compensable; `implementation-defined` (its runtime actions) -> unknown. Any
  other word, or none, is unknown: treated as a mutation nobody can undo, never as safe.
- risk: low, medium, high, critical and semantic-saga-mcp's `unknown` (below low in order; 3 risk units unless the
  policy says otherwise). Read case-insensitively as semantic-saga-mcp does; any other word, or none, is unknown.
- Other fields (semantic-saga-mcp's `effects` and `compensation_guarantee`, or your own) are carried in the
  snapshot and shown by get_action; nothing acts on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

REVERSIBILITY = ("reversible", "compensable", "irreversible", "read_only", "unknown")
# semantic-saga-mcp's reversibility words, onto ours.
SEED_REVERSIBILITY = {"full": "reversible", "configured": "compensable", "implementation-defined": "unknown"}
RISKS = ("unknown", "low", "medium", "high", "critical")
UNKNOWN = "unknown"


def reversibility_of(value: Any) -> str:
    """Our reversibility class for a declared value (ours, semantic-saga-mcp's, or anything else -> unknown)."""
    if not isinstance(value, str):
        return UNKNOWN
    if value in REVERSIBILITY:
        return value
    return SEED_REVERSIBILITY.get(value.strip().lower(), UNKNOWN)


def risk_of(value: Any) -> str:
    """Our risk level for a declared value: low..critical, else unknown (case-insensitive, as the seed reads it)."""
    if not isinstance(value, str):
        return UNKNOWN
    level = value.strip().lower()
    return level if level in RISKS else UNKNOWN


def semantic_reversibility(semantic: Any) -> str:
    return reversibility_of(semantic.get("reversibility") if isinstance(semantic, Mapping) else None)
