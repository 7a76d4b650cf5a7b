"""Reading hand-written JSON files strictly: a duplicate key or NaN/Infinity is refused, not silently resolved.

`json` keeps the last of two equal keys, so `{"action": "block", ..., "action": "allow"}` would quietly mean allow;
in an operator's file that hides an edit. Used by the proxy configuration and compensation pack loaders, which
turn `StrictJsonError` into their own error naming the file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class StrictJsonError(ValueError):
    """The file cannot be read, is not UTF-8, or is not strict JSON. The message names the file and the place."""


def read_strict_json(path: str | os.PathLike[str], what: str) -> Any:
    """The parsed content of `path`; `what` names the file in messages ("proxy configuration", ...)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StrictJsonError(f"The {what} {path} does not exist; check the path.") from None
    except UnicodeDecodeError:
        raise StrictJsonError(f"The {what} {path} is not UTF-8 text.") from None
    except OSError as exc:
        raise StrictJsonError(f"The {what} {path} cannot be read ({exc.strerror}).") from None
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise StrictJsonError(
            f"The {what} {path} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}."
        ) from None
    except ValueError as exc:
        raise StrictJsonError(f"The {what} {path} is not valid JSON: {exc}.") from None
    except RecursionError:
        # Python's parser recurses per level: a few thousand nested brackets would otherwise stop start-up with a
        # traceback instead of this message.
        raise StrictJsonError(f"The {what} {path} is nested too deeply to read; flatten it.") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"the key {key!r} appears twice in one object")
        result[key] = value
    return result


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
