"""Arguments for tests that call every operation: the smallest object each argument model accepts."""

from __future__ import annotations

import typing
import uuid
from typing import Any

from pydantic import BaseModel


def minimal_arguments(model: type[BaseModel]) -> dict[str, Any]:
    """Every required field with the plainest value of its type (text "x", an empty object or list, false, the first
    of its literals, a fixed UUID, a nested model's own minimal arguments)."""
    return {name: _plainest(field.annotation) for name, field in model.model_fields.items() if field.is_required()}


def _plainest(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return minimal_arguments(annotation)
    if origin is typing.Literal:
        return typing.get_args(annotation)[0]
    if origin is dict or annotation is dict:
        return {}
    if origin is list or annotation is list:
        return []
    if annotation is bool:
        return False
    if annotation in (int, float):
        return 1
    if annotation is uuid.UUID:
        return uuid.UUID(int=1)
    return "x"
