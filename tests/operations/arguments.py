"""Arguments for tests that call every operation: the smallest object each argument model accepts."""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel


def minimal_arguments(model: type[BaseModel]) -> dict[str, Any]:
    """Every required field with the plainest value of its type (text "x", an empty object)."""
    arguments: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        if field.is_required():
            arguments[name] = {} if typing.get_origin(field.annotation) is dict else "x"
    return arguments
