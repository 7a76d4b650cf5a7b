"""Reading registry files: strict JSON (duplicate keys and NaN refused, errors naming line and column), then the
whole-file validation of registry.contracts. Reads only: `registry.services.registry_load_file` writes what this
returns, and the start-up check of SAGA_ACTIONS_FILE (registry.checks) validates with it without writing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from registry.contracts import validate_registry_document
from registry.errors import RegistryError


def read_registry_file(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The contracts of a registry file, every one valid, or RegistryError naming each problem."""
    return validate_registry_document(_read_document(path))


class _DuplicateKeyError(ValueError):
    pass


def _read_document(path: str | os.PathLike[str]) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _file_error(
            f"Registry file {path} does not exist. Check the path (the load_actions argument or SAGA_ACTIONS_FILE)."
        ) from None
    except UnicodeDecodeError:
        raise _file_error(f"Registry file {path} is not UTF-8 text.") from None
    except OSError as exc:
        raise _file_error(f"Registry file {path} cannot be read ({exc.strerror}).") from None
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise _file_error(
            f"Registry file {path} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}. "
            "Fix the syntax and load it again; nothing was registered."
        ) from None
    except ValueError as exc:
        raise _file_error(f"Registry file {path} is not valid JSON: {exc}. Nothing was registered.") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of duplicate keys silently; in a contract that hides an edit, so refuse it.
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKeyError(f"the key {key!r} appears twice in one object")
        result[key] = value
    return result


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (and cannot be hashed canonically)")


def _file_error(message: str) -> RegistryError:
    return RegistryError("INVALID_REGISTRY_FILE", message)
