"""A pack entry without a capture (a create) may read what the call made right after it (`readAfter` on the entry,
reading $.args and $.result): validated by path, converted into the contract's top-level `read_after`."""

from __future__ import annotations

from typing import Any

from registry.pack_validation import pack_problems
from registry.packs import parse_pack

CREATE = {"tool": "create_contact", "inverse": {"tool": "delete_contact", "args": {"id": "$.result.id"}}}


def _pack(entry: dict[str, Any]) -> dict[str, Any]:
    return {"name": "crm", "description": "a CRM", "entries": [entry]}


def test_a_create_reads_what_it_made_and_becomes_the_contracts_read_after():
    entry = {**CREATE, "readAfter": {"tool": "get_contact", "args": {"id": "$.result.id"}}}
    assert pack_problems(_pack(entry), "p.json") == []
    (parsed,) = parse_pack(_pack(entry), "p.json").entries
    parts = parsed.as_mcp_contract_parts()
    assert parts["read_after"] == {"tool": "get_contact", "arguments": {"id": "${result.id}"}}
    assert "capture" not in parts and parsed.needs() == ("get_contact", "delete_contact")


def test_a_read_after_is_refused_beside_a_capture_or_reading_what_it_cannot():
    with_capture = {
        **CREATE,
        "capture": {"tool": "list_contacts", "args": {}},
        "readAfter": {"tool": "get_contact", "args": {"id": "$.result.id"}},
    }
    assert any("move it there" in problem for problem in pack_problems(_pack(with_capture), "p.json"))
    reading_pre_state = {**CREATE, "readAfter": {"tool": "get_contact", "args": {"id": "$.pre_state.id"}}}
    (problem,) = pack_problems(_pack(reading_pre_state), "p.json")
    assert problem.startswith("p.json: entries[0].readAfter.args.id:")
