"""The REST API's JSON parser: DRF's, except that a body nested past Python's recursion limit is a 400 that says so
(issue 20: a 5000-deep body was a 500 INTERNAL_ERROR from json.loads' RecursionError)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class DepthSafeJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(
                "The JSON body is nested too deeply to read; arguments may nest at most "
                f"{settings.SAGA_MAX_ARGUMENT_DEPTH} levels (SAGA_MAX_ARGUMENT_DEPTH). Nothing was created or "
                "changed: send a flatter body."
            ) from None
