"""Fixtures for registry tests: a file root, a local HTTP server, and fresh valid contracts to mutate.

Defined here (not only in tests/conftest.py) so the registry tests stand alone.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.httpserver import RecordingHTTPServer

EXAMPLE_REGISTRY = Path(__file__).resolve().parents[2] / "examples" / "action_registry.json"


@pytest.fixture
def file_root(settings: Any, tmp_path: Path) -> Path:
    root = tmp_path / "files"
    root.mkdir()
    settings.SAGA_FILE_ROOT = str(root)
    return root


@pytest.fixture(scope="module")
def recording_server() -> Iterator[RecordingHTTPServer]:
    with RecordingHTTPServer() as server:
        yield server


@pytest.fixture
def server(recording_server: RecordingHTTPServer) -> RecordingHTTPServer:
    """The module's server with scripts and recorded requests cleared for this test."""
    recording_server.reset()
    return recording_server


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
