"""Request parsing for the REST routes: bodies and query strings validated by the operations' argument models.

Bodies are validated strictly (JSON types as sent: "5" is not an integer), query strings with conversion (they are
text). Values the URL carries are added by the view and may not be repeated in the body or query. Text no database
column can hold is refused here, at the boundary, as a 400.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from rest_framework import exceptions
from rest_framework.request import Request

from sagas.api.schema import list_fields
from sagas.errors import InvalidInput
from sagas.operations.arguments import argument_problems, storable_problem

M = TypeVar("M", bound=BaseModel)

# Query parameters DRF itself understands (format=json picks the renderer in the browsable API).
DRF_QUERY_PARAMETERS = frozenset({"format"})


def _validated(model: type[M], data: dict[str, Any], *, strict: bool) -> M:
    try:
        return model.model_validate(data, strict=strict)
    except ValidationError as error:
        problems = [problem.message for problem in argument_problems(error, root="(body)")]
        raise InvalidInput(
            "INVALID_ARGUMENTS",
            f"The request was refused: {'; '.join(problems)}. Nothing was created or changed. Fix the arguments "
            "(/api/v1/docs/ describes them) and send it again.",
            problems=problems,
        ) from error


def _storable(value: object, where: str) -> None:
    """Refuse text no database column can hold, in the body, the query and the URL alike; a value past a configured
    argument limit (depth, string length) is INVALID_ARGUMENTS, as on the other surfaces."""
    if problem := storable_problem(value, where):
        code = "INVALID_ARGUMENTS" if "(SAGA_MAX_ARGUMENT_" in problem else "INVALID_INPUT"
        raise InvalidInput(code, f"{problem}. Nothing was created or changed.", problems=[problem])


def body_args(request: Request, model: type[M], *, fixed: dict[str, Any] | None = None, **url: str) -> M:
    """The JSON body (an object; empty = {}) validated strictly, with the URL's values (and `fixed` ones) added."""
    if not request.content_type and _has_body(request):
        raise exceptions.UnsupportedMediaType("(none)")  # DRF alone would silently read such a body as {}
    data = request.data
    if not isinstance(data, dict):
        raise InvalidInput(
            "INVALID_ARGUMENTS",
            f"The request body must be a JSON object, got {type(data).__name__}. Nothing was done.",
            problems=["(body): must be a JSON object"],
        )
    preset = {**url, **(fixed or {})}
    if clash := sorted(set(data) & set(preset)):
        raise InvalidInput(
            "INVALID_ARGUMENTS",
            f"{', '.join(clash)} must not be in the body: this URL decides it. Nothing was done.",
            problems=[f"{name}: not allowed in the body" for name in clash],
        )
    _storable({**data, **url}, "body")
    return _validated(model, {**data, **preset}, strict=True)


def _has_body(request: Request) -> bool:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0) > 0
    except ValueError:
        return True


def query_args(request: Request, model: type[M], **url: str) -> M:
    """The query string validated by `model` (strings converted to the field types), plus the URL's values."""
    repeatable = list_fields(model)
    data: dict[str, Any] = {}
    for name in request.query_params:
        if name in DRF_QUERY_PARAMETERS:
            continue
        if name in url:
            raise InvalidInput(
                "INVALID_ARGUMENTS",
                f"{name} must not be in the query string: this URL decides it. Nothing was done.",
                problems=[f"{name}: not allowed in the query string"],
            )
        values = request.query_params.getlist(name)
        if name not in repeatable and len(values) > 1:
            raise InvalidInput(
                "INVALID_ARGUMENTS",
                f"The query parameter {name} was given {len(values)} times; give it once. Nothing was done.",
                problems=[f"{name}: given more than once"],
            )
        data[name] = values if name in repeatable else values[0]
    _storable({**data, **url}, "query")
    return _validated(model, {**data, **url}, strict=False)
