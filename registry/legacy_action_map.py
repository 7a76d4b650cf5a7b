"""semantic-saga-mcp's older action-map format, read as registry contracts.

Besides its versioned registry ({"schema_version": 1, "actions": [...]}), semantic-saga-mcp reads `--actions FILE`
written as a map from action name to two HTTP requests, and loads each entry as the contract NAME@legacy-v1:

    {"reserve_inventory": {"forward": {"url": ..., "method": "POST", "body": {...}}, "rollback": {...}}}

Each entry becomes the contract the seed made of it, written in our format and validated like any other contract:
id the entry name, version `legacy-v1`, kind http; semantic domain "unspecified", operation the name,
reversibility "configured" (our compensable), risk "unknown"; input_schema {"type": "object"} and no output schema;
`forward` the entry's forward, `compensation` its rollback, with the seed's request defaults written out (method
POST, upper-cased as the seed sent it; timeout 30 s; a null body or headers left out: the seed sent none); and the
seed's retry defaults for a contract without a policy (1 forward attempt, 3 compensation attempts). Other keys of an
entry are ignored as the seed ignored them (the load warning names them); an unknown key in a request is refused.

`legacy-v1` is not a semantic version: the registry schema allows it as the one exception, so that a converted file
keeps the contracts' identity (NAME@legacy-v1 stays pinned by the steps that ran under it).
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Iterable
from typing import Any

from registry.contracts import SCHEMA_VERSION, definition_hash, registry_schema, validate_registry_document
from registry.errors import RegistryError
from registry.models import ActionDefinition

LEGACY_VERSION = "legacy-v1"
_LEGACY_NUMBER = re.compile(r"legacy-v([1-9][0-9]*)")
GUIDE = 'docs/action_registry.md, section "The older action-map format"'
SHAPE = '{NAME: {"forward": request, "rollback": request}}'
REQUEST_FIELDS = ("url", "method", "body", "headers", "timeout_seconds")  # the seed's HttpRequest fields
_ENTRY_FIELDS = ("forward", "rollback")
_NULL_MEANS_NONE = ("body", "headers")
_ENTRY_HINT = '{"forward": {"url": ..., "method": ...}, "rollback": {"url": ..., "method": ...}}'
_VERSIONED_KEYS = ("schema_version", "actions", "$schema")
_SEED_TIMEOUT_SECONDS = 30
_SEED_POLICY = {"forward": {"max_attempts": 1}, "compensation": {"max_attempts": 3}}
_NAMES_SHOWN = 10
_CONTRACT_PATH = re.compile(r"^actions\[(\d+)\](\.forward|\.compensation)?")


def is_legacy_action_map(document: Any) -> bool:
    """A non-empty object without the versioned format's keys, with at least one entry that is an object."""
    return (
        isinstance(document, dict)
        and bool(document)
        and not any(key in document for key in _VERSIONED_KEYS)
        and any(isinstance(entry, dict) for entry in document.values())
    )


def legacy_contracts(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The contracts NAME@legacy-v1 of an action map, every one valid, or RegistryError naming each entry at fault."""
    problems = [problem for name, entry in document.items() for problem in _entry_problems(name, entry)]
    if problems:
        raise RegistryError("INVALID_REGISTRY_FILE", _refusal(problems), problems)
    contracts = [_contract(name, entry) for name, entry in document.items()]
    _validate(contracts)
    return contracts


def loaded_note(path: str | os.PathLike[str], document: dict[str, Any]) -> str:
    """The warning for a loaded action map: what it is, what each entry became, how to convert it."""
    names = [f"{name}@{LEGACY_VERSION}" for name in document]
    more = len(names) - _NAMES_SHOWN
    shown = ", ".join(names[:_NAMES_SHOWN]) + (f" and {more} more" if more > 0 else "")
    ignored = [f"{name}.{key}" for name, entry in document.items() for key in entry if key not in _ENTRY_FIELDS]
    note = (
        f"{os.fspath(path)} is in semantic-saga-mcp's older action-map format ({SHAPE}); each entry was loaded as "
        f"the contract NAME@{LEGACY_VERSION}, as semantic-saga-mcp loads it: {shown} (risk unknown, any input object "
        "accepted, one forward attempt). Convert it to the versioned registry format "
        '({"schema_version": 1, "actions": [...]}) to give each action a semantic version, its real risk and '
        f"reversibility, and input and output schemas: see {GUIDE}."
    )
    if ignored:
        note += f" Ignored, as semantic-saga-mcp ignores them: {', '.join(ignored)}."
    return note


# --- the seed's shape, checked before translating --------------------------------------------------------------


def _entry_problems(name: str, entry: Any) -> list[str]:
    problems = []
    if not re.fullmatch(registry_schema()["$defs"]["contract"]["properties"]["id"]["pattern"], name):
        problems.append(
            f"{name!r}: the entry name is the action id, and must be a letter followed by letters, digits, '_', "
            "'.' or '-'; rename the entry (and the action name the sagas use)"
        )
        name = repr(name)
    if not isinstance(entry, dict):
        return [*problems, f"{name}: is {_json_type(entry)}, but an entry must be an object {_ENTRY_HINT}"]
    for part in _ENTRY_FIELDS:
        if part not in entry:
            also = " (this format calls it rollback, not compensation)" if "compensation" in entry else ""
            problems.append(f"{name}.{part}: missing{also}; every entry needs both requests {_ENTRY_HINT}")
        elif not isinstance(entry[part], dict):
            problems.append(f"{name}.{part}: is {_json_type(entry[part])}, but must be an HTTP request object")
        else:
            problems += _request_problems(f"{name}.{part}", entry[part])
    return problems


def _request_problems(where: str, request: dict[str, Any]) -> list[str]:
    problems = [
        f"{where}.{key}: not a field of an HTTP request (those are {', '.join(REQUEST_FIELDS)}); remove or rename it"
        for key in request
        if key not in REQUEST_FIELDS
    ]
    if "url" not in request:
        problems.append(f"{where}.url: missing; give the absolute http:// or https:// URL the request is sent to")
    elif not isinstance(request["url"], str):
        problems.append(
            f"{where}.url: is {_json_type(request['url'])}, but must be a string: the absolute http:// or https:// "
            "URL the request is sent to"
        )
    if "method" in request and not isinstance(request["method"], str):
        problems.append(
            f'{where}.method: is {_json_type(request["method"])}, but must be a string such as "DELETE" '
            "(leave it out for POST)"
        )
    return problems


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


# --- translation and validation ----------------------------------------------------------------------------------


def _contract(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": name,
        "version": LEGACY_VERSION,
        "kind": "http",
        "semantic": {"domain": "unspecified", "operation": name, "reversibility": "configured", "risk": "unknown"},
        "input_schema": {"type": "object"},
        "execution_policy": copy.deepcopy(_SEED_POLICY),
        "forward": _request(entry["forward"]),
        "compensation": _request(entry["rollback"]),
    }


def _request(given: dict[str, Any]) -> dict[str, Any]:
    """The seed's request with its defaults written out; null body and headers dropped (it sent none)."""
    request = {
        key: copy.deepcopy(value) for key, value in given.items() if key not in _NULL_MEANS_NONE or value is not None
    }
    request["method"] = given.get("method", "POST").upper()
    request.setdefault("timeout_seconds", _SEED_TIMEOUT_SECONDS)
    return request


def _validate(contracts: list[dict[str, Any]]) -> None:
    try:
        validate_registry_document({"schema_version": SCHEMA_VERSION, "actions": contracts})
    except RegistryError as exc:
        problems = list(_relabel(exc.problems, [contract["id"] for contract in contracts]))
        raise RegistryError(exc.code, _refusal(problems), problems) from None


def _relabel(problems: Iterable[str], names: list[str]) -> Iterable[str]:
    """`actions[0].compensation.url: ...` as the file says it: `reserve_inventory.rollback.url: ...`."""
    for problem in problems:
        match = _CONTRACT_PATH.match(problem)
        if match is None:
            yield problem
            continue
        part = {".forward": ".forward", ".compensation": ".rollback"}.get(match[2] or "", "")
        yield names[int(match[1])] + part + problem[match.end() :]


def _refusal(problems: list[str]) -> str:
    return (
        f"The file is in semantic-saga-mcp's older action-map format ({SHAPE}), and {len(problems)} problem(s) "
        "stop it from loading:\n"
        + "\n".join(f"- {problem}" for problem in problems)
        + f"\nFix them and load the file again (nothing was registered), or convert the file to the versioned "
        f"registry format: see {GUIDE}."
    )


def versioned(contracts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The action map's contracts under the versions to register: each one's `legacy-vN` that already holds this
    content, else legacy-v1 for a new id, else the next `legacy-vN` (an entry edited since it was loaded: the older
    format has no version to raise, and a registered version never changes content, for steps pin it)."""
    return [_versioned(contract) for contract in contracts]


def _versioned(contract: dict[str, Any]) -> dict[str, Any]:
    held = {
        row.version: row.definition_hash
        for row in ActionDefinition.objects.filter(action_id=contract["id"], version__startswith="legacy-v")
        if _LEGACY_NUMBER.fullmatch(row.version)
    }
    for version, digest in held.items():
        if definition_hash({**contract, "version": version}) == digest:
            return {**contract, "version": version}
    if not held:
        return contract
    number = max(int(_LEGACY_NUMBER.fullmatch(version).group(1)) for version in held)  # type: ignore[union-attr]
    return {**contract, "version": f"legacy-v{number + 1}"}
