"""The JSON policy backend: a schema-validated file evaluated in a fixed, documented order.

Order (first decisive step wins): 1. hard budgets; 2. the tenant's own rules in file order; 3. wildcard ("*")
rules in file order; 4. approval thresholds (irreversible or unknown reversibility, then risk at or above the
threshold); 5. the effective default effect (the tenant's, else the wildcard section's, else the file's).

The engine sees only sanitized control-plane context (PolicyInput): who, which phase, which action and its
declared semantics, and counters. Never action inputs or results: a decision can be logged and audited safely.

The file, each tenant section and each rule may carry documentation keys (DOCUMENTATION_KEYS): notes for people,
never read here, so they change no decision. Any other key the schema does not know is refused, naming the closest
known key: a misspelled `max_paralel` would otherwise be a budget silently not enforced.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from governance.policy.facts import (
    DEFAULT_RISK_WEIGHTS,
    FORWARD_PHASES,
    RISK_ORDER,
    UNSAFE_REVERSIBILITY,
    Decision,
    PolicyFileError,
    PolicyInput,
)
from registry.semantics import risk_of

SCHEMA_PATH = Path(__file__).with_name("governance_policy.schema.json")
WILDCARD = "*"
UNVERSIONED = "unversioned"
# Notes for people reading the file, accepted where the schema lists them (the file, a tenant section, a rule) and
# never read. `$comment` is JSON Schema's own comment keyword; the others are what hand-written JSON uses.
DOCUMENTATION_KEYS = ("description", "comment", "$comment", "title")

# What semantic-saga-mcp calls each budget in a refusal; its clients and CI match on these phrases.
SEED_BUDGET_LABELS = {
    "max_steps_per_saga": "saga step budget",
    "max_planned_nodes": "planned-node budget",
    "max_risk_units": "risk-unit budget",
    "max_parallel": "parallelism budget",
}


@cache
def policy_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


def _schema_problems(document: Any) -> list[str]:
    validator = Draft202012Validator(policy_schema())
    problems = []
    for error in sorted(validator.iter_errors(document), key=lambda e: [str(p) for p in e.absolute_path]):
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            problems += _unknown_keys(error, path)
        else:
            problems.append(f"{path or '(file)'}: {error.message}{_note_misplaced(error)}")
    return problems


def _unknown_keys(error: ValidationError, path: str) -> list[str]:
    """One problem per key the schema does not know at `path`, naming the closest known key and what to do."""
    schema = error.schema if isinstance(error.schema, dict) else {}
    known = list(schema.get("properties", {}))
    problems = []
    for key in sorted(set(error.instance) - set(known), key=str):
        where = f"{path}.{key}" if path else str(key)
        problems.append(f"{where}: unknown key {key!r} ({_what_to_do(str(key), known)})")
    return problems


def _what_to_do(key: str, known: list[str]) -> str:
    if close := difflib.get_close_matches(key, known, n=1, cutoff=0.6):
        return f"did you mean {close[0]}? Correct the spelling"
    elsewhere = _keys_elsewhere()
    if close := difflib.get_close_matches(key, list(elsewhere), n=1, cutoff=0.8):
        place = elsewhere[close[0]]
        if close[0] == key:
            return f"{key} belongs in {place}, not here; move it there"
        return f"did you mean {close[0]}? It belongs in {place}, not here; move it there and correct the spelling"
    settings = ", ".join(k for k in known if k not in DOCUMENTATION_KEYS and k != "$schema")
    if all(k in known for k in DOCUMENTATION_KEYS):
        return f"the keys here are {settings}; remove it, or keep a note in {', '.join(DOCUMENTATION_KEYS)}"
    return f"the keys here are {settings}; remove it, or keep a note in the enclosing rule's or tenant's description"


@cache
def _keys_elsewhere() -> dict[str, str]:
    """Each key the schema knows, and where it belongs: a key written one level off is named with its place."""
    places = {
        "tenant": "a tenant section",
        "budgets": "a tenant's budgets",
        "rule": "a rule",
        "match": "a rule's match",
    }
    schema = policy_schema()
    found = {key: "the file's top level" for key in schema["properties"]}
    for name, place in places.items():
        for key in schema["$defs"][name]["properties"]:
            found.setdefault(key, place)
    return {key: place for key, place in found.items() if key not in DOCUMENTATION_KEYS}


def _note_misplaced(error: ValidationError) -> str:
    """A documentation key directly under `tenants` names a tenant there: say where notes go."""
    path = list(error.absolute_path)
    if error.validator == "type" and len(path) == 2 and path[0] == "tenants" and path[1] in DOCUMENTATION_KEYS:
        return (
            f" (tenants is keyed by tenant id, so {path[1]!r} here is a tenant; put the note in the file's own "
            f"{path[1]}, or in a tenant section)"
        )
    return ""


def _duplicate_rule_ids(document: dict[str, Any]) -> list[str]:
    problems = []
    for tenant, section in document.get("tenants", {}).items():
        seen: set[str] = set()
        for index, rule in enumerate(section.get("rules", [])):
            if rule["id"] in seen:
                problems.append(f"tenants.{tenant}.rules[{index}].id: duplicate rule id {rule['id']!r}")
            seen.add(rule["id"])
    return problems


class JsonPolicy:
    backend = "json"

    def __init__(self, document: Any, *, source: str = "policy") -> None:
        problems = _schema_problems(document) or _duplicate_rule_ids(document)
        if problems:
            raise PolicyFileError(
                message=f"{source} is not a valid governance policy: {'; '.join(problems[:10])}. Nothing was loaded; "
                "fix the file (docs/governance_policy.schema.json describes it) and load it again.",
                problems=problems,
            )
        self.document: dict[str, Any] = document
        # Optional, as in semantic-saga-mcp, whose files without one are "unversioned".
        self.revision: str = document.get("revision") or UNVERSIONED
        weights = {str(key).lower(): value for key, value in document.get("risk_weights", {}).items()}
        self.weights = {**DEFAULT_RISK_WEIGHTS, **weights}

    @classmethod
    def load(cls, path: str | Path) -> JsonPolicy:
        try:
            document = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise PolicyFileError(message=f"Policy file {path} does not exist. Set SAGA_POLICY_FILE to it.") from exc
        except ValueError as exc:
            raise PolicyFileError(message=f"Policy file {path} is not valid JSON: {exc}.") from exc
        except RecursionError:
            # Python's parser recurses per level: a traceback at start-up otherwise, for a few thousand brackets.
            raise PolicyFileError(message=f"Policy file {path} is nested too deeply to read; flatten it.") from None
        return cls(document, source=str(path))

    # --- evaluation ------------------------------------------------------------------------------------------------

    def _sections(self, tenant_id: str) -> list[dict[str, Any]]:
        tenants = self.document.get("tenants", {})
        return [tenants[t] for t in (tenant_id, WILDCARD) if t in tenants and (t != WILDCARD or tenant_id != t)]

    def risk_units(self, risk: str) -> int:
        return int(self.weights.get(risk_of(risk), 0))

    def evaluate(self, facts: PolicyInput) -> Decision:
        sections = self._sections(facts.tenant_id)
        for step in (self._over_budget, self._rules, self._thresholds):
            decided = step(facts, sections)
            if decided is not None:
                return decided
        effect = next((s["default_effect"] for s in sections if "default_effect" in s), None)
        effect = effect or self.document.get("default_effect", "deny")
        return self._decide(effect, f"no rule matched; the default effect for tenant {facts.tenant_id} is {effect}")

    def _decide(self, effect: str, reason: str, rules: Sequence[str] = (), budget: str | None = None) -> Decision:
        return Decision(effect, reason, self.backend, self.revision, tuple(rules), budget)

    def budgets(self, tenant_id: str) -> dict[str, int]:
        merged: dict[str, int] = {}
        for section in reversed(self._sections(tenant_id)):  # wildcard first, the tenant's own values win
            merged.update(section.get("budgets", {}))
        return merged

    def _over_budget(self, facts: PolicyInput, sections: list[dict[str, Any]]) -> Decision | None:
        if facts.phase not in FORWARD_PHASES:
            return None
        budgets = self.budgets(facts.tenant_id)
        checks = [
            ("max_planned_nodes", facts.phase == "plan", facts.saga_planned_nodes + 1),
            ("max_steps_per_saga", facts.phase in ("execute", "run"), facts.saga_steps + 1),
            ("max_risk_units", facts.phase in ("plan", "execute"), facts.saga_risk_units + self.risk_units(facts.risk)),
            ("max_parallel", facts.phase == "run", facts.requested_parallel),
        ]
        for name, applies, wanted in checks:
            if applies and name in budgets and wanted > budgets[name]:
                # Opens with semantic-saga-mcp's wording ("parallelism budget exceeded: ..."), which clients match on.
                reason = (
                    f"{SEED_BUDGET_LABELS[name]} exceeded: requested {wanted}, limit {budgets[name]} (hard budget "
                    f"{name} of tenant {facts.tenant_id})"
                )
                return self._decide("deny", reason, budget=name)
        return None

    def _rules(self, facts: PolicyInput, sections: list[dict[str, Any]]) -> Decision | None:
        for section in sections:
            for rule in section.get("rules", []):
                if matches(rule.get("match", {}), facts):
                    reason = rule.get("reason") or f"rule {rule['id']} matched"
                    return self._decide(rule["effect"], reason, [rule["id"]])
        return None

    def _thresholds(self, facts: PolicyInput, sections: list[dict[str, Any]]) -> Decision | None:
        if facts.phase not in FORWARD_PHASES:
            return None
        strict = next(
            (s["irreversible_requires_approval"] for s in sections if "irreversible_requires_approval" in s), False
        )
        if strict and facts.reversibility in UNSAFE_REVERSIBILITY:
            reason = f"{facts.action} is {facts.reversibility}: a person must approve it before it runs"
            return self._decide("require_approval", reason, ["reversibility:" + facts.reversibility])
        threshold = next((s["approval_at_or_above_risk"] for s in sections if "approval_at_or_above_risk" in s), None)
        if threshold and RISK_ORDER.get(facts.risk, 0) >= RISK_ORDER[threshold]:
            reason = f"risk {facts.risk} is at or above the approval threshold {threshold}"
            return self._decide("require_approval", reason, [f"threshold:{threshold}"])
        return None

    def status(self, tenant_id: str) -> dict[str, Any]:
        sections = self._sections(tenant_id)
        return {
            "tenant_id": tenant_id,
            "backend": self.backend,
            "revision": self.revision,
            "default_effect": next((s["default_effect"] for s in sections if "default_effect" in s), None)
            or self.document.get("default_effect", "deny"),
            "approval_at_or_above_risk": next(
                (s["approval_at_or_above_risk"] for s in sections if "approval_at_or_above_risk" in s), None
            ),
            "budgets": self.budgets(tenant_id),
            "rule_ids": [rule["id"] for s in sections for rule in s.get("rules", [])],
        }


def _globs(patterns: Iterable[str], value: str) -> bool:
    return any(fnmatch.fnmatchcase(value, pattern) for pattern in patterns)


def _listed(value: Any) -> Any:
    """A condition's value as a list: one string stands for a list of one (semantic-saga-mcp writes either)."""
    return [value] if isinstance(value, str) else value


def matches(match: dict[str, Any], facts: PolicyInput) -> bool:
    """Every condition given must hold; within a list any item may match. Every string condition is a glob, as in
    semantic-saga-mcp (a word without * or ? matches exactly)."""
    conditions: list[tuple[str, Callable[[list[str]], bool]]] = [
        ("actions", lambda v: _globs(v, facts.action)),
        ("phases", lambda v: _globs(v, facts.phase)),
        ("risks", lambda v: _globs(v, facts.risk)),
        ("domains", lambda v: _globs(v, facts.domain)),
        ("operations", lambda v: _globs(v, facts.operation)),
        ("resources", lambda v: _globs(v, facts.resource)),
        ("principal_types", lambda v: _globs(v, facts.principal_type)),
        ("roles_any", lambda v: bool(facts.roles & set(v))),
        ("roles_all", lambda v: set(v) <= facts.roles),
        ("roles_none", lambda v: not facts.roles & set(v)),
        ("scopes_any", lambda v: bool(facts.scopes & set(v))),
        ("definition_changed", lambda v: facts.definition_changed is bool(v)),
    ]
    return all(test(_listed(match[key])) for key, test in conditions if key in match)
