"""System check for SAGA_ACTIONS_FILE: the registry file `serve` and `mcp` load at start-up exists and is valid.

Registered in RegistryConfig.ready; `semantic-saga check` reports it and the serving commands refuse to start on
it (saga_project.checks.require_valid_configuration). The file is read and validated exactly as
`registry_load_file` reads it, without writing anything: version conflicts with rows already in the database are
found when the file is loaded. A file in semantic-saga-mcp's older action-map format loads, with warning saga.W030.
"""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register
from django.core.checks import Warning as CheckWarning

from registry.errors import RegistryError

# `semantic-saga check --tag saga` runs only Semantic Saga's own checks.
TAG = "saga"


@register(TAG)
def actions_file_check(**kwargs: Any) -> list[CheckMessage]:
    path = settings.SAGA_ACTIONS_FILE
    if not path:
        return []
    from registry.files import read_registry_file_with_notes  # JSON Schema validation: only when a file is named

    try:
        _, notes = read_registry_file_with_notes(os.path.abspath(path))
    except RegistryError as exc:
        return [
            Error(
                f"SAGA_ACTIONS_FILE: {exc.message}",
                hint="Correct the file (docs/action_registry.schema.json describes it; `semantic-saga load_actions "
                "FILE` reports the same problems), point SAGA_ACTIONS_FILE at another file, or unset it.",
                id="saga.E030",
            )
        ]
    return [
        CheckWarning(
            f"SAGA_ACTIONS_FILE: {note}",
            hint="It loads as it is; convert it when you can (docs/action_registry.md).",
            id="saga.W030",
        )
        for note in notes
    ]
