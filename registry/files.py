"""Reading registry files: strict JSON (registry.strict_json: duplicate keys and NaN refused, errors naming line
and column), then the whole-file validation of registry.contracts. Reads only: `registry.services.registry_load_file`
writes what this returns, and the start-up check of SAGA_ACTIONS_FILE (registry.checks) validates with it without
writing.
"""

from __future__ import annotations

import os
from typing import Any

from registry.contracts import validate_registry_document
from registry.errors import RegistryError
from registry.strict_json import StrictJsonError, read_strict_json


def read_registry_file(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The contracts of a registry file, every one valid, or RegistryError naming each problem."""
    try:
        document = read_strict_json(path, "registry file")
    except StrictJsonError as exc:
        raise RegistryError(
            "INVALID_REGISTRY_FILE",
            f"{exc} It is the load_actions argument or SAGA_ACTIONS_FILE; fix it and load it again. Nothing was "
            "registered.",
        ) from None
    return validate_registry_document(document)
