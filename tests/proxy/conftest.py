"""Paths of the proxy foundations' fixtures, and the demo world (examples/demo_mcp_server.py) loaded in-process."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.proxy.harness import demo_http, served  # noqa: F401  (the proxy transport tests' module fixtures)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAGAZ = FIXTURES / "sagaz"
EXAMPLES = ROOT / "examples"


def load_demo_world() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_mcp_server_for_packs", EXAMPLES / "demo_mcp_server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def write_config(tmp_path: Path):
    """Writes a document as a configuration file in a fresh directory and returns its path."""

    def write(document: Any, name: str = "proxy.json") -> Path:
        path = tmp_path / name
        path.write_text(json.dumps(document), encoding="utf-8")
        return path

    return write
