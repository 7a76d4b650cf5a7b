"""Compensation packs shipped with Semantic Saga for the servers people run (docs/proxy.md, "Packs for the
reference servers"): a proxy configuration names one as `"builtin:<name>"` in its `packs`, e.g. `"builtin:memory"`
for `@modelcontextprotocol/server-memory`. Each is an ordinary pack file beside this module, vetted against the
server's real answers (tests/proxy/test_reference_packs.py)."""

from __future__ import annotations

from pathlib import Path

PREFIX = "builtin:"
HERE = Path(__file__).resolve().parent


def names() -> list[str]:
    return sorted(path.stem for path in HERE.glob("*.json"))


def builtin_pack(reference: str) -> Path | None:
    """The file `builtin:<name>` names, or None when there is no such pack (names() lists them)."""
    name = reference.removeprefix(PREFIX)
    path = HERE / f"{name}.json"
    return path if name.replace("-", "").isalnum() and path.is_file() else None
