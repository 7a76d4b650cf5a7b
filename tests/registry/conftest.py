"""Fixtures for registry tests: fresh valid contracts to mutate (file_root and the HTTP server come from
tests/conftest.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.httpserver import RecordingHTTPServer

EXAMPLE_REGISTRY = Path(__file__).resolve().parents[2] / "examples" / "action_registry.json"


@pytest.fixture
def server(downstream: RecordingHTTPServer) -> RecordingHTTPServer:
    """The shared local HTTP server (tests/conftest.py), reset for this test."""
    return downstream


@pytest.fixture
def example_document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(EXAMPLE_REGISTRY.read_text(encoding="utf-8"))
    return document


@pytest.fixture
def builtin_contract() -> dict[str, Any]:
    return copy.deepcopy(
        {
            "id": "make_note",
            "version": "1.0.0",
            "kind": "builtin",
            "semantic": {
                "domain": "filesystem",
                "operation": "create",
                "resource": "file",
                "risk": "low",
                "reversibility": "compensable",
            },
            "input_schema": {"type": "object"},
            "forward": {"builtin": "create_text_file"},
            "compensation": {"builtin": "create_text_file.undo"},
        }
    )


@pytest.fixture
def http_contract() -> dict[str, Any]:
    return copy.deepcopy(
        {
            "id": "charge",
            "version": "1.0.0",
            "kind": "http",
            "semantic": {
                "domain": "payments",
                "operation": "charge",
                "resource": "card",
                "risk": "high",
                "reversibility": "compensable",
            },
            "input_schema": {"type": "object"},
            "forward": {
                "url": "http://127.0.0.1:9/charges",
                "method": "POST",
                "body": {"amount": "${input.amount}", "reference": "${step.id}"},
            },
            "compensation": {
                "url": "http://127.0.0.1:9/refunds",
                "method": "POST",
                "body": {"charge_id": "${result.id}"},
            },
        }
    )
