"""Reading registry files: strict JSON (registry.strict_json: duplicate keys and NaN refused, errors naming line
and column), then the whole-file validation of registry.contracts. Reads only: `registry.services.registry_load_file`
writes what this returns, and the start-up check of SAGA_ACTIONS_FILE (registry.checks) validates with it without
writing. A file in semantic-saga-mcp's older action-map format is read as its contracts NAME@legacy-v1
(registry.legacy_action_map), with a warning: logged by read_registry_file, a system check warning at start-up.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from registry import legacy_action_map
from registry.contracts import validate_registry_document
from registry.errors import RegistryError
from registry.strict_json import StrictJsonError, read_strict_json

logger = logging.getLogger(__name__)
_TOLD: set[str] = set()  # the notes this process has logged


@dataclass(frozen=True)
class RegistryRead:
    """A registry file's contracts, every one valid; warnings about the file; whether it is semantic-saga-mcp's
    older action map (its contracts are NAME@legacy-v1 until the load versions a changed one)."""

    contracts: list[dict[str, Any]]
    notes: list[str]
    legacy: bool


def read_registry_file(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The contracts of a registry file, every one valid, or RegistryError naming each problem; what the reader
    should know about the file (the older format loaded) is logged as a warning."""
    read = read_registry(path)
    tell(read.notes)
    return read.contracts


def tell(notes: list[str]) -> None:
    for note in notes:
        if note not in _TOLD:  # serve loads the file, then the app it serves loads it again: say it once
            _TOLD.add(note)
            logger.warning("%s", note)


def read_registry_file_with_notes(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The contracts of a registry file and warnings about it, without logging them (the start-up check)."""
    read = read_registry(path)
    return read.contracts, read.notes


def read_registry(path: str | os.PathLike[str]) -> RegistryRead:
    try:
        document = read_strict_json(path, "registry file")
    except StrictJsonError as exc:
        raise RegistryError(
            "INVALID_REGISTRY_FILE",
            f"{exc} It is the load_actions argument or SAGA_ACTIONS_FILE; fix it and load it again. Nothing was "
            "registered.",
        ) from None
    if legacy_action_map.is_legacy_action_map(document):
        contracts = legacy_action_map.legacy_contracts(document)
        return RegistryRead(contracts, [legacy_action_map.loaded_note(path, document)], legacy=True)
    try:
        return RegistryRead(validate_registry_document(document), [], legacy=False)
    except RegistryError as exc:
        if not _neither_format(document):
            raise
        raise RegistryError(exc.code, f"{exc.message} {OLDER_FORMAT_HINT}", exc.problems) from None


# Said when a file has neither format's keys: it may have been meant as the seed's older action map.
OLDER_FORMAT_HINT = (
    "Or, in semantic-saga-mcp's older action-map format, one entry per action: "
    '{"NAME": {"forward": {"url": ..., "method": ...}, "rollback": {"url": ..., "method": ...}}} '
    '(docs/action_registry.md, "The older action-map format").'
)


def _neither_format(document: Any) -> bool:
    return isinstance(document, dict) and not {"schema_version", "actions", "$schema"} & set(document)
