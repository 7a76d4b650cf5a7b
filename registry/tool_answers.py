"""What a tools/call answer carries as JSON: the one rule every reader of a tool's answer applies.

Most MCP servers answer with their JSON serialized into a text content block and no `structuredContent` (the
reference servers, Sagaz's toybox); newer ones add `structuredContent`. A compensation that names `${result.id}`, a
capture read whose answer becomes `pre_state`, the drift check that reads the same thing again, the ledger and the
preview report all need the same value out of either shape, so there is one rule, here:

    structuredContent when the answer has it; else the first text block, parsed as JSON; else none.

`none` is said, not guessed: a compensation that needs a field of a result that carries no JSON cannot be rendered,
and the undo plan says so at the time of the call (registry.compensation_plan), not at undo time. The answer as the
caller got it (content blocks and all) is kept beside the payload, so nothing the agent saw is lost.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

PayloadSource = Literal["structuredContent", "text", "none"]
# Why a payload is missing, as the undo plan and the ledger say it.
NO_JSON_REASONS: dict[str, str] = {
    "no_text": "the result carries no JSON (no structuredContent and no text block)",
    "not_json": "the result carries no JSON (its text is not JSON)",
}


@dataclass(frozen=True)
class Payload:
    """The JSON a tool's answer carries, where it came from, and (when there is none) why."""

    value: Any
    source: PayloadSource
    missing: str = ""  # a NO_JSON_REASONS value when source is "none"


def payload_of(answer: Mapping[str, Any]) -> Payload:
    """The payload of a tools/call answer in its wire form (`structuredContent`, `content` blocks)."""
    structured = answer.get("structuredContent")
    if structured is not None:
        return Payload(structured, "structuredContent")
    text = first_text(answer.get("content"))
    if text is None:
        return Payload(None, "none", NO_JSON_REASONS["no_text"])
    try:
        return Payload(json.loads(text), "text")
    except ValueError:
        return Payload(None, "none", NO_JSON_REASONS["not_json"])


def first_text(content: Any) -> str | None:
    """The text of the first text block of `content` (a list of content blocks), or None."""
    for block in content if isinstance(content, list) else ():
        if isinstance(block, Mapping) and block.get("type") == "text":
            text = block.get("text")
            return text if isinstance(text, str) else None
    return None


def text_of(answer: Mapping[str, Any]) -> str:
    """Exactly what an answer's text blocks say (joined by newlines; "" when there are none): what a pattern reads
    (registry.capture_outcomes). An empty file's content is "", never a JSON stand-in for it."""
    content = answer.get("content")
    return "\n".join(
        str(block.get("text", ""))
        for block in (content if isinstance(content, list) else ())
        if isinstance(block, Mapping) and block.get("type") == "text"
    )


def answer_text(answer: Mapping[str, Any]) -> str:
    """What an answer says, for a message: its text blocks joined, else its payload as JSON."""
    content = answer.get("content")
    texts = [
        str(block.get("text", ""))
        for block in (content if isinstance(content, list) else ())
        if isinstance(block, Mapping) and block.get("type") == "text"
    ]
    if any(texts):
        return " ".join(texts)
    return json.dumps(payload_of(answer).value, ensure_ascii=False)
