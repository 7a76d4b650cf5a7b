"""Action contracts: validation, the canonical definition hash, execution-policy defaults, backoff, schemas.

Validation is two passes over the same contract: the published JSON Schema (docs/action_registry.schema.json,
a copy of registry/action_registry.schema.json) for shape, then the rules JSON Schema cannot say well (template
roots and placement, compensation presence, which fields belong to which kind, import drafts, schema validity).
Both report every problem at once, each prefixed with the path of the offending value
(`actions[2].execution_policy.forward.max_attempts: ...`), because an operator fixing a file wants the whole list,
not one error per attempt.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audit.canonical import sha256_hex
from registry.errors import RegistryError
from registry.semantics import semantic_reversibility

# jsonschema (and `referencing`) load with the first validation, not with this module, and so do the template, URL
# and capture-branch rules (registry.templating with JMESPath behind it, url_templates, capture_outcomes): a process
# that only reads contracts or hashes them (an operator's `semantic-saga ledger` and `verify`) never pays for them.
if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

SCHEMA_PATH = Path(__file__).with_name("action_registry.schema.json")
SCHEMA_VERSION = 1

# Fields of the contract that are lifecycle state, not content: they are not hashed or stored in the snapshot,
# so deactivating a version never changes its identity.
STATE_FIELDS = ("active",)

# Backoff defaults: half a second rides out a blip without hammering; doubling to a 30 s cap keeps the total wait
# of the default 3 forward attempts near 1.5 s, and compensation (5 attempts) keeps trying for about 7.5 s.
_BACKOFF_DEFAULTS: dict[str, float] = {
    "initial_backoff_seconds": 0.5,
    "backoff_multiplier": 2.0,
    "max_backoff_seconds": 30.0,
    "jitter": 0.1,
}
FORWARD_RETRY_DEFAULTS: dict[str, Any] = {"max_attempts": 3, **_BACKOFF_DEFAULTS}
COMPENSATION_RETRY_DEFAULTS: dict[str, Any] = {"max_attempts": 5, **_BACKOFF_DEFAULTS}
# Reversibility classes that promise an undo, and the one that must not pretend to have one.
_NEEDS_COMPENSATION = ("reversible", "compensable")
_NO_COMPENSATION = ("read_only",)
# The coordinator sets this header from the step id; a contract value would break retry deduplication.
_RESERVED_HEADERS = ("idempotency-key",)
# Contract fields that only mean something for MCP actions.
_MCP_ONLY_FIELDS = ("server", "capture")
# Template roots that yield a string, so they cannot stand for a whole MCP arguments object.
_SCALAR_ROOTS = ("saga", "step")
# Validator cache size: one entry per distinct input/output schema; a registry rarely has more than a few dozen.
_VALIDATOR_CACHE_SIZE = 512
# Long instance reprs (a whole object in a type error) make messages unreadable; cut them.
_MESSAGE_LIMIT = 300


# --- schema and validators --------------------------------------------------------------------------------------


@cache
def registry_schema() -> dict[str, Any]:
    """The published whole-file schema (with `$defs/contract`)."""
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


@cache
def _file_validator() -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(registry_schema())


@cache
def _contract_validator() -> Draft202012Validator:
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    schema = registry_schema()
    registry: Registry = Registry().with_resource(schema["$id"], Resource.from_contents(schema))
    return Draft202012Validator({"$ref": f"{schema['$id']}#/$defs/contract"}, registry=registry)


# --- validation -------------------------------------------------------------------------------------------------


def validate_contract(contract: dict[str, Any], path: str = "contract") -> None:
    """Raise RegistryError(INVALID_CONTRACT) listing every problem of one contract, or return None."""
    problems = _schema_problems(_contract_validator().iter_errors(contract), path)
    problems += _semantic_problems(contract, path)
    if problems:
        raise _invalid(contract, path, problems)


def validate_registry_document(doc: Any) -> list[dict[str, Any]]:
    """Validate a whole registry file (all contracts, then cross-contract rules); return its contracts.

    INVALID_REGISTRY_FILE for problems of the file itself (shape, schema_version, duplicates across contracts);
    INVALID_CONTRACT when only individual contracts are wrong. Nothing is partially accepted.
    """
    errors = list(_file_validator().iter_errors(doc))
    file_errors = [error for error in errors if not _is_contract_error(error)]
    if file_errors:
        problems = _schema_problems(file_errors, "")
        raise RegistryError("INVALID_REGISTRY_FILE", _file_message(problems), problems)
    actions: list[dict[str, Any]] = doc["actions"]
    problems = _schema_problems(errors, "")
    for index, contract in enumerate(actions):
        problems += _semantic_problems(contract, f"actions[{index}]")
    if problems:
        raise RegistryError("INVALID_CONTRACT", _contracts_message(problems), problems)
    cross = _cross_contract_problems(actions)
    if cross:
        raise RegistryError("INVALID_REGISTRY_FILE", _file_message(cross), cross)
    return actions


def _is_contract_error(error: ValidationError) -> bool:
    path = list(error.absolute_path)
    return len(path) >= 2 and path[0] == "actions" and isinstance(path[1], int)


def _schema_problems(errors: Iterable[ValidationError], prefix: str) -> list[str]:
    found = sorted(errors, key=lambda error: (_join_path(prefix, error.absolute_path), error.message))
    return [f"{_join_path(prefix, error.absolute_path) or '(top level)'}: {_describe(error)}" for error in found]


def _describe(error: ValidationError) -> str:
    # A regex in a message helps nobody; the schema's description says what the value should look like.
    if error.validator == "pattern" and isinstance(error.schema, dict) and error.schema.get("description"):
        return _clip(f"{error.instance!r} is not {error.schema['description']}")
    return _clip(error.message)


def _clip(text: str) -> str:
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 3] + "..."


def _join_path(prefix: str, parts: Iterable[Any]) -> str:
    path = prefix
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _semantic_problems(contract: Any, path: str) -> list[str]:
    """Rules beyond the JSON Schema; written defensively because the contract may also have shape errors."""
    if not isinstance(contract, dict):
        return []
    problems = _schema_validity_problems(contract, path)
    problems += _compensation_presence_problems(contract, path)
    problems += _draft_problems(contract, path)
    for part, allow_result in (("forward", False), ("compensation", True)):
        request = contract.get(part)
        if isinstance(request, dict) and contract.get("kind") == "http":
            problems += _http_request_problems(contract, request, f"{path}.{part}", allow_result=allow_result)
    if contract.get("kind") == "mcp":
        problems += _mcp_problems(contract, path)
    else:
        problems += [
            f"{path}.{field}: only mcp actions have a {field!r} (this one is kind {contract.get('kind')!r}); remove "
            "it, or make the action kind mcp"
            for field in _MCP_ONLY_FIELDS
            if field in contract
        ]
    return problems


def _schema_validity_problems(contract: dict[str, Any], path: str) -> list[str]:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    problems = []
    for field in ("input_schema", "output_schema"):
        schema = contract.get(field)
        if not isinstance(schema, dict):
            continue
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as error:
            where = _join_path(f"{path}.{field}", error.absolute_path)
            problems.append(f"{where}: {_clip(error.message)} (not a valid JSON Schema draft 2020-12)")
    return problems


def _compensation_presence_problems(contract: dict[str, Any], path: str) -> list[str]:
    # semantic-saga-mcp's words count as ours (registry.semantics): its "full" is our reversible.
    reversibility = semantic_reversibility(contract.get("semantic"))
    has_it = "compensation" in contract
    if reversibility == "reversible" and not has_it:
        return [
            f"{path}: semantic.reversibility 'reversible' means the inverse is known, so the contract must declare "
            "it: add a 'compensation' (the call that undoes the forward call), or declare 'unknown' (or "
            "'irreversible') until you have one"
        ]
    if reversibility in _NEEDS_COMPENSATION and not has_it:
        return [
            f"{path}: 'compensation' is required because semantic.reversibility is {reversibility!r}; add the "
            "request that undoes the forward call, or declare the action 'irreversible'"
        ]
    if reversibility in _NO_COMPENSATION and has_it:
        return [
            f"{path}.compensation: not allowed because semantic.reversibility is 'read_only' (there is nothing "
            "to undo); remove it, or choose another reversibility class"
        ]
    return []


def _http_request_problems(
    contract: dict[str, Any], request: dict[str, Any], path: str, *, allow_result: bool
) -> list[str]:
    """Whole-value templates in the body, per-segment templates in the URL (registry.url_templates), none in
    headers: a header is where secrets go, and a value there could smuggle a second header or a credential."""
    from registry.templating import TEMPLATE_MARKER, iter_strings, template_problems
    from registry.url_templates import url_template_problems

    problems = template_problems(request.get("body"), f"{path}.body", allow_result=allow_result)
    schemas = {"input": contract.get("input_schema"), "result": contract.get("output_schema")}
    problems += url_template_problems(request.get("url"), f"{path}.url", allow_result=allow_result, schemas=schemas)
    for where, text in iter_strings(request.get("headers"), f"{path}.headers"):
        if TEMPLATE_MARKER in text:
            problems.append(
                f"{where}: templates are rendered in the body and the URL, not in headers; {text!r} would be sent "
                "literally. Put the value in the body or the URL path, or use a secret reference for credentials"
            )
    headers = request.get("headers")
    for name in headers if isinstance(headers, dict) else ():
        if name.lower() in _RESERVED_HEADERS:
            problems.append(
                f"{path}.headers.{name}: set by the coordinator from the step id (so retries deduplicate); "
                "remove it from the contract"
            )
    return problems


def _draft_problems(contract: dict[str, Any], path: str) -> list[str]:
    review = contract.get("review")
    if isinstance(review, dict) and review.get("draft") is True and contract.get("active", True) is not False:
        return [
            f"{path}: this is an unreviewed draft (review.draft is true), so it cannot be active; review it (notes in "
            'review.notes), then remove review.draft, or register it with "active": false'
        ]
    return []


def _mcp_problems(contract: dict[str, Any], path: str) -> list[str]:
    """Templates only in arguments, with the roots each call may use; nothing templated in server or tool names."""
    from registry.capture_outcomes import BRANCH_OF, branch_problems
    from registry.templating import template_problems

    problems = []
    capture = contract.get("capture")
    has_capture = isinstance(capture, dict)
    capture = capture if isinstance(capture, dict) else {}
    calls = (("capture", False, False), ("forward", False, False), ("compensation", True, has_capture))
    # A capture's outcome branches undo a call whose capture read nothing: they may read the result, no pre_state.
    branches = tuple((f"capture.{key}", True, False) for key in BRANCH_OF.values() if has_capture and key in capture)
    if isinstance(capture.get("read_after"), dict):
        branches += (("capture.read_after", False, False),)  # a read with the call's arguments, like the capture
    if isinstance(contract.get("read_after"), dict):
        branches += (("read_after", True, False),)  # a create's read of what it made: ${input} and ${result}
        if has_capture:
            problems.append(f"{path}.read_after: with a capture, read after the call with capture.read_after")
    if has_capture:
        problems += branch_problems(capture, f"{path}.capture")
    for part, allow_result, allow_pre_state in (*calls, *branches):
        call = _part(contract, part)
        if not isinstance(call, dict):
            continue
        where = f"{path}.{part}"
        arguments = call.get("arguments")
        problems += template_problems(
            arguments, f"{where}.arguments", allow_result=allow_result, allow_pre_state=allow_pre_state
        )
        if isinstance(arguments, str) and arguments.removeprefix("${").split(".")[0].rstrip("}") in _SCALAR_ROOTS:
            problems.append(
                f"{where}.arguments: {arguments!r} yields a string, but arguments must be an object; use an object "
                'such as {"id": "${step.id}"} or a template yielding one, such as "${input}"'
            )
        problems += _literal_only(call.get("tool"), f"{where}.tool")
    problems += _literal_only(contract.get("server"), f"{path}.server")
    return problems


def _part(contract: dict[str, Any], part: str) -> Any:
    """`forward`, or a nested part such as `capture.when_absent`."""
    found: Any = contract
    for key in part.split("."):
        found = found.get(key) if isinstance(found, dict) else None
    return found


def _literal_only(value: Any, path: str) -> list[str]:
    from registry.templating import TEMPLATE_MARKER, iter_strings

    return [
        f"{where}: templates are only rendered in arguments; {text!r} would be used literally"
        for where, text in iter_strings(value, path)
        if TEMPLATE_MARKER in text
    ]


def _cross_contract_problems(actions: list[dict[str, Any]]) -> list[str]:
    problems = []
    seen: dict[tuple[str, str], int] = {}
    active_at: dict[str, int] = {}
    for index, contract in enumerate(actions):
        key = (contract["id"], contract["version"])
        if key in seen:
            problems.append(
                f"actions[{index}]: {key[0]}@{key[1]} is already declared at actions[{seen[key]}]; "
                "each id+version may appear once"
            )
        seen.setdefault(key, index)
        if contract.get("active", True):
            if contract["id"] in active_at:
                problems.append(
                    f"actions[{index}]: a second active version of {contract['id']!r} (the other is at "
                    f"actions[{active_at[contract['id']]}]); only one version per id can be active, mark the "
                    'others "active": false'
                )
            active_at.setdefault(contract["id"], index)
    return problems


def _invalid(contract: Any, path: str, problems: list[str]) -> RegistryError:
    name = _contract_name(contract)
    message = (
        f"{path}{name} is not a valid action contract ({len(problems)} problem(s)):\n"
        + "\n".join(f"- {problem}" for problem in problems)
        + "\nFix these fields and register it again; nothing was registered."
    )
    return RegistryError("INVALID_CONTRACT", message, problems)


def _contract_name(contract: Any) -> str:
    if isinstance(contract, dict) and isinstance(contract.get("id"), str):
        return f" ({contract['id']}@{contract.get('version', '?')})"
    return ""


def _contracts_message(problems: list[str]) -> str:
    return (
        f"The registry file has {len(problems)} contract problem(s):\n"
        + "\n".join(f"- {problem}" for problem in problems)
        + "\nFix them and load the file again; nothing was registered."
    )


def _file_message(problems: list[str]) -> str:
    return (
        "The registry file is not valid:\n"
        + "\n".join(f"- {problem}" for problem in problems)
        + '\nA registry file is {"schema_version": 1, "actions": [...]} (see docs/action_registry.schema.json); '
        "fix it and load it again; nothing was registered."
    )


# --- identity and policy ----------------------------------------------------------------------------------------


def stored_definition(contract: dict[str, Any]) -> dict[str, Any]:
    """The immutable snapshot kept on the registry row and on steps: the contract without lifecycle state."""
    return {key: copy.deepcopy(value) for key, value in contract.items() if key not in STATE_FIELDS}


def definition_hash(contract: dict[str, Any]) -> str:
    """sha256 hex of the canonical JSON of the contract as given (no defaults filled in), minus `active`.

    Contracts hold secret references only, never values, so the hash and the snapshot are safe to show.
    """
    return sha256_hex(stored_definition(contract))


def has_compensation(contract: dict[str, Any]) -> bool:
    return isinstance(contract.get("compensation"), dict)


def resolved_execution_policy(contract: dict[str, Any]) -> dict[str, Any]:
    """The execution policy with every default filled in (always the full shape)."""
    given = contract.get("execution_policy") or {}
    return {
        "forward": {**FORWARD_RETRY_DEFAULTS, **given.get("forward", {})},
        "compensation": {**COMPENSATION_RETRY_DEFAULTS, **given.get("compensation", {})},
        "failure_mode": given.get("failure_mode", "rollback"),
        "approval_required": given.get("approval_required", False),
        "idempotent": given.get("idempotent", False),
    }


def backoff_seconds(policy_part: dict[str, Any], attempt: int, seed: str) -> float:
    """Delay before retry number `attempt` (1 = after the first failure), deterministic for (seed, attempt).

    `min(max, initial * multiplier**(attempt-1))` scaled by a factor in [1-jitter, 1+jitter] taken from
    sha256(seed:attempt). Deterministic so that a recovered or replayed retry schedules the same time; seeded
    per step so that steps failing together do not retry in lockstep.
    """
    if attempt < 1:
        raise ValueError(f"attempt starts at 1 (got {attempt})")
    part = {**_BACKOFF_DEFAULTS, **policy_part}
    try:
        raw = float(part["initial_backoff_seconds"]) * float(part["backoff_multiplier"]) ** (attempt - 1)
    except OverflowError:
        raw = float("inf")
    base = min(float(part["max_backoff_seconds"]), raw)
    digest = hashlib.sha256(f"{seed}:{attempt}".encode()).digest()
    unit = int.from_bytes(digest[:8], "big") / 2**64  # uniform in [0, 1)
    jitter = float(part["jitter"])
    return base * (1.0 - jitter + 2.0 * jitter * unit)


# --- instance validation ----------------------------------------------------------------------------------------

_validators: OrderedDict[str, Draft202012Validator] = OrderedDict()
_validators_lock = threading.Lock()


def validate_instance(schema: dict[str, Any], instance: Any) -> list[str]:
    """Human-readable errors of `instance` against `schema` ("at $.a.b: 'x' is not of type 'integer'")."""
    validator = _compiled(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda error: (list(map(str, error.path)), error.message))
    return [f"at {_json_path(error.absolute_path)}: {_clip(error.message)}" for error in errors]


def _compiled(schema: dict[str, Any]) -> Draft202012Validator:
    # Compiling is cheap but not free and runs on every step; schemas are immutable, so cache by content hash.
    key = sha256_hex(schema)
    with _validators_lock:
        validator = _validators.get(key)
        if validator is not None:
            _validators.move_to_end(key)
            return validator
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    with _validators_lock:
        _validators[key] = validator
        if len(_validators) > _VALIDATOR_CACHE_SIZE:
            _validators.popitem(last=False)
    return validator


def _json_path(parts: Iterable[Any]) -> str:
    path = "$"
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif str(part).isidentifier():
            path += f".{part}"
        else:
            path += f"[{json.dumps(part)}]"
    return path


def compensation_needs_result(contract: dict[str, Any]) -> bool:
    """The compensation request references forward-result fields: it cannot run for a step that has no result."""
    from registry.templating import references_result_fields

    return has_compensation(contract) and references_result_fields(contract["compensation"])
