"""Resolving pinned contracts and validating payloads against them, with registry errors mapped once."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from registry.contracts import definition_hash, resolved_execution_policy, validate_instance
from registry.errors import RegistryError
from registry.models import ActionDefinition
from registry.selectors import action_get
from sagas.coordinator.sql import statements
from sagas.errors import InvalidInput, NotFound, SagaError
from sagas.models import Saga
from sagas.selectors.proxy_sessions import PROXY_ACTION_PREFIX  # proxy.<server>.<tool>: one spelling for all


@dataclass(frozen=True)
class Pinned:
    """One contract version as a step or node pins it."""

    action: str
    version: str
    definition_hash: str
    definition: dict[str, Any]

    @property
    def policy(self) -> dict[str, Any]:
        return resolved_execution_policy(self.definition)


def is_proxied_action(saga: Saga, action: str) -> bool:
    """A node or step of a proxy session that the proxy itself runs: never claimed by an executor."""
    return action.startswith(PROXY_ACTION_PREFIX) and saga.is_proxy_session


def resolve(action: object, version: object = None) -> Pinned:
    if not isinstance(action, str) or not action:
        raise InvalidInput(message="action must be a non-empty string naming a registered action (see list_actions).")
    if version is not None and not isinstance(version, str):
        raise InvalidInput(message="version must be a string such as '1.0.0', or omitted for the active version.")
    stored = statements.action_rows(action, version)
    if len(stored) == 1 and stored[0][1]:
        found, _, digest, text = stored[0]
        return _pinned_from_text(action, found, digest, text)
    try:  # missing, inactive or ambiguous: the registry's own read says precisely what is wrong
        row = action_get(action, version)
    except RegistryError as exc:
        raise NotFound(exc.code, exc.message) from exc
    return pinned_from_row(row)


def _pinned_from_text(action: str, version: str, stored_hash: str, text: str) -> Pinned:
    """The row's contract, decoded once per process per stored text; not verified here (pinned_version and
    pinned_from_stored verify a pin), but only a text that matches its hash is kept for next time."""
    return _verified(action, version, stored_hash, text) or Pinned(action, version, stored_hash, json.loads(text))


def _verified(action: str, version: str, stored_hash: str, text: str) -> Pinned | None:
    """The contract stored as `text`, if it hashes to `stored_hash`: from this process's cache when it verified the
    same text before, else decoded, hashed and remembered. None for a text that does not match its hash."""
    key = (action, version, stored_hash)
    known = _VERIFIED.get(key)
    if known is not None and known[0] == text:
        return known[1]
    pinned = Pinned(action, version, stored_hash, json.loads(text))
    if definition_hash(pinned.definition) != stored_hash:
        return None
    _VERIFIED.put(key, text, pinned)
    return pinned


def pinned_from_row(row: ActionDefinition) -> Pinned:
    return Pinned(row.action_id, row.version, row.definition_hash, row.definition)


def pinned_version(action: str, version: str, expected_hash: str) -> Pinned:
    """The exact version a node pinned; refuses a registry row whose content no longer matches the pin."""
    pinned = resolve(action, version)
    if pinned.definition_hash != expected_hash or definition_hash(pinned.definition) != expected_hash:
        raise _hash_mismatch(action, version, expected_hash)
    return pinned


def pinned_from_stored(
    action: str, version: str, expected_hash: str, stored: tuple[bool | None, str | None, str | None]
) -> Pinned:
    """`pinned_version` from the registry row's (active, definition_hash, definition as stored text), read by the
    query that found the node (sagas.coordinator.sql.statements.ready_nodes), so a claim costs no registry round trip.

    The stored text is compared with the text this process last verified for the pin: the same text is the same
    contract, so it is neither decoded nor hashed again; any other text (a changed row) is verified from scratch.
    A missing or inactive row takes the registry path, which raises the precise error.
    """
    active, stored_hash, text = stored
    if not active or text is None:
        return pinned_version(action, version, expected_hash)
    pinned = _verified(action, version, expected_hash, text) if stored_hash == expected_hash else None
    if pinned is None:
        raise _hash_mismatch(action, version, expected_hash)
    return pinned


def _hash_mismatch(action: str, version: str, expected_hash: str) -> SagaError:
    return SagaError(
        "DEFINITION_HASH_MISMATCH",
        f"The registered contract {action}@{version} no longer matches the hash this node pinned "
        f"({expected_hash[:12]}...). Nothing was executed. An operator must restore the contract or the node "
        "must be re-planned against a new version.",
    )


class _VerifiedContracts:
    """Pins this process has verified, with the stored text they were verified from (bounded, least recent out).

    Keyed by the pin (action, version, hash): a hash is the contract's identity, so an entry never goes stale; the
    text comparison is what notices a registry row edited in place.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[str, str, str], tuple[str, Pinned]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> tuple[str, Pinned] | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: tuple[str, str, str], text: str, pinned: Pinned) -> None:
        with self._lock:
            self._entries[key] = (text, pinned)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)


_VERIFIED = _VerifiedContracts(size=1024)


def check_input(pinned: Pinned, payload: object) -> dict[str, Any]:
    if not isinstance(payload, dict):
        raise InvalidInput(
            message=f"input for {pinned.action}@{pinned.version} must be a JSON object. Nothing was written "
            "and nothing ran.",
        )
    errors = validate_instance(pinned.definition["input_schema"], payload)
    if errors:
        raise InvalidInput(
            message=f"input does not match the input_schema of {pinned.action}@{pinned.version}: "
            f"{'; '.join(errors[:5])}. Nothing was written and nothing ran. Fix the input (get_action shows "
            "the schema) and call again.",
            errors=errors,
        )
    return payload


def output_errors(definition: dict[str, Any], result: Any) -> list[str]:
    schema = definition.get("output_schema")
    return validate_instance(schema, result) if schema else []
