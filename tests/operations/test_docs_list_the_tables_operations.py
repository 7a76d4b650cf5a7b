"""The operator docs' tables of tools, operations and endpoints say what the operation table serves."""

from __future__ import annotations

import re
from pathlib import Path

from sagas.operations.table import A2A_OPERATIONS, MCP_TOOLS, REST_ROUTES

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _first_cells(document: str) -> list[list[str]]:
    rows = [line for line in (DOCS / document).read_text().splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def test_mcp_md_lists_every_tool_and_no_other():
    listed = {name for cells in _first_cells("mcp.md") for name in re.findall(r"`(\w+)\(", cells[0])}
    assert listed == set(MCP_TOOLS)


def test_a2a_md_lists_every_operation_with_its_tool_and_capability():
    rows = {
        cells[0].strip("`"): (cells[1].strip("`"), cells[-1]) for cells in _first_cells("a2a.md") if len(cells) == 4
    }
    assert rows == {verb: (op.name, str(op.capability)) for verb, op in A2A_OPERATIONS.items()}


def test_rest_api_md_lists_every_route():
    listed = {cells[0].strip("`") for cells in _first_cells("rest_api.md") if re.match(r"`(GET|POST) /api", cells[0])}
    documented = {
        f"{route.method} /api/v1/" + route.path.replace("<str:", "{").replace(">", "}") for _, route in REST_ROUTES
    }
    assert listed == documented
