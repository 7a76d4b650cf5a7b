"""What an action would send, without sending it: the forward request with templates resolved and secrets redacted.

Used by preview sagas (sagas.coordinator.previews). Secret references are never resolved here, so a preview can
neither leak a secret nor fail because one is missing where it runs; the redacted value names the reference so
an operator can check it is the intended one.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from registry.templating import render
from registry.url_templates import render_url

REDACTED = "[redacted secret {ref}]"


def preview_request(
    definition: dict[str, Any], *, input: dict[str, Any], saga_id: uuid.UUID | str, step_id: uuid.UUID | str
) -> dict[str, Any]:
    """The contract's forward request for this input (kind, target and rendered templates); raises ActionFailure
    (TEMPLATE_PATH_MISSING, URL_TEMPLATE_VALUE_INVALID) exactly when the real call would fail before sending
    anything."""
    scope = {"input": input, "result": None, "saga": {"id": str(saga_id)}, "step": {"id": str(step_id)}}
    forward = definition.get("forward", {})
    rendered = render(_redact(forward), scope, "forward")
    if definition.get("kind") == "http" and isinstance(rendered.get("url"), str):
        rendered["url"] = render_url(rendered["url"], scope, "forward.url")
    request: dict[str, Any] = {"kind": definition.get("kind"), "forward": rendered}
    if "capture" in definition:
        # A capture is a read the real run would make first; a preview does not make it.
        # Only the read itself: its outcome's branches are inverses, rendered at undo time from the result.
        read = {key: value for key, value in definition["capture"].items() if key in ("tool", "arguments")}
        request["capture"] = render(_redact(read), scope, "capture")
    if "server" in definition:
        request["server"] = _redact(definition["server"])
    return request


def _redact(value: Any) -> Any:
    if isinstance(value, Mapping):
        if "secret_ref" in value:
            return REDACTED.format(ref=value["secret_ref"])
        return {key: _redact(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_redact(item) for item in value]
    return value
