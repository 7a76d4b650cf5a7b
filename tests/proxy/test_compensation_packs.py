"""Compensation packs: Sagaz's format loads, strict validation names every problem's path, two inverses for one
tool are refused, lookup takes the most specific entry, entries translate to the registry's compensation and capture
templates, and entries the servers cannot use are named. (The packs undo real worlds through the path production
runs in test_undo.py and test_pack_answer_shapes.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from registry.packs import PackError, PackSet, load_packs, parse_pack
from registry.templating import template_problems
from tests.proxy.conftest import EXAMPLES, SAGAZ

TOYBOX_PACK = SAGAZ / "packages" / "toybox" / "sagaz-pack.json"


def _pack(*entries: dict[str, Any], name: str = "p") -> dict[str, Any]:
    return {"name": name, "description": "test pack", "entries": list(entries)}


def _entry(tool: str, inverse_tool: str = "undo", **extra: Any) -> dict[str, Any]:
    return {"tool": tool, "inverse": {"tool": inverse_tool, "args": {"id": "$.args.id"}}, **extra}


def _problems(document: Any) -> list[str]:
    with pytest.raises(PackError) as caught:
        parse_pack(document, "pack.json")
    return caught.value.problems


def test_sagaz_toybox_pack_loads_unchanged():
    # given a pack in Sagaz's format: an inverse from the result, and two from a captured pre-state
    packs = load_packs([TOYBOX_PACK])
    # then every entry is there with its capture, inverse and note
    create, delete, update = packs.entries
    assert (create.pack, create.capture, create.inverse.args) == ("toybox-crm", None, {"id": "$.result.id"})
    assert delete.capture is not None and delete.capture.tool == "get_contact"
    assert delete.inverse.args["id"] == "$.pre_state.id" and update.inverse.tool == "update_contact"
    assert packs.inverse_for("toybox", "delete_contact") is delete
    # (delete_contact's entry needs get_contact for its capture, which this listing lacks: it covers nothing here)
    assert packs.uncovered("toybox", ["list_contacts", "create_contact", "delete_contact", "send_email"]) == [
        "list_contacts",
        "delete_contact",
        "send_email",
    ]


def test_example_demo_pack_covers_the_demo_crm():
    packs = load_packs([EXAMPLES / "demo_pack.json"])
    tools = ["get_contact", "create_contact", "update_contact", "delete_contact", "send_email", "transfer_funds"]
    assert packs.uncovered("demo", tools) == ["get_contact", "send_email", "transfer_funds"]


BAD_PACKS = [
    ([], "pack.json: a compensation pack is a JSON object"),
    ({"name": "p", "description": "d"}, "pack.json: 'entries' is missing"),
    ({**_pack(_entry("x")), "version": 2}, "pack.json: unknown key 'version'"),
    (_pack(_entry("x"), name="my pack"), "pack.json: name: 'my pack' is not a pack name"),
    ({**_pack(_entry("x")), "description": " "}, "pack.json: description: one non-empty line"),
    (_pack(), "pack.json: entries: a list of at least one entry"),
    (_pack({"tool": "x"}), "pack.json: entries[0]: 'inverse' is missing"),
    (_pack(_entry("")), "pack.json: entries[0].tool: the tool to match"),
    (_pack(_entry("x", server="a b")), "pack.json: entries[0].server: 'a b' is not a server name"),
    (_pack(_entry("x", notes="typo")), "pack.json: entries[0]: unknown key 'notes'"),
    (_pack(_entry("x", note="")), "pack.json: entries[0].note: when present, a non-empty note"),
    (_pack({"tool": "x", "inverse": {"tool": "y"}}), "pack.json: entries[0].inverse: 'args' is missing"),
    (_pack({"tool": "x", "inverse": {"tool": "y", "args": []}}), "pack.json: entries[0].inverse.args: an object"),
    (
        _pack({"tool": "x", "inverse": {"tool": "y", "args": {"id": "${input.id}"}}}),
        "pack.json: entries[0].inverse.args.id: '${input.id}' is not a reference",
    ),
    (
        _pack({"tool": "x", "inverse": {"tool": "y", "args": {"n": 3}}}),
        "pack.json: entries[0].inverse.args.n: 3 is not a reference",
    ),
    (
        _pack({"tool": "x", "inverse": {"tool": "y", "args": {"id": "$.input.id"}}}),
        "pack.json: entries[0].inverse.args.id: '$.input.id' is not a reference; expected $.args.x or $.result.x",
    ),
    (
        _pack(_entry("x", capture={"tool": "get", "args": {"id": "$.result.id"}})),
        "pack.json: entries[0].capture.args.id: '$.result.id' reads $.result, which does not exist before the call",
    ),
    (
        _pack({"tool": "x", "inverse": {"tool": "y", "args": {"n": "$.pre_state.name"}}}),
        "pack.json: entries[0].inverse.args.n: reads $.pre_state but the entry declares no capture",
    ),
]


@pytest.mark.parametrize(("document", "expected"), BAD_PACKS, ids=[expected for _, expected in BAD_PACKS])
def test_bad_pack_is_refused_naming_the_path(document: Any, expected: str):
    problems = _problems(document)
    assert any(problem.startswith(expected) for problem in problems), problems


def test_every_problem_of_a_pack_is_reported_at_once():
    document = _pack({"tool": "", "inverse": {"tool": "y", "args": {"a": "x"}}}, {"tool": "z", "extra": 1})
    assert [problem.split(":")[1].strip() for problem in _problems(document)] == [
        "entries[0].tool",
        "entries[0].inverse.args.a",
        "entries[1]",
        "entries[1]",
    ]


def test_two_inverses_for_one_tool_are_refused_naming_both(tmp_path: Path):
    # given two pack files that both declare delete_contact for any server
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(_pack(_entry("delete_contact"), name="a")), encoding="utf-8")
    second.write_text(json.dumps(_pack(_entry("create_contact"), _entry("delete_contact"), name="b")), encoding="utf-8")
    # when they are loaded together
    with pytest.raises(PackError) as caught:
        load_packs([first, second])
    # then the second declaration is refused, naming where the first one is
    (problem,) = caught.value.problems
    assert problem.startswith(f"{second} entries[1]: a second entry for tool 'delete_contact'")
    assert f"{first} entries[0] already covers it" in problem
    assert caught.value.code == "INVALID_COMPENSATION_PACK" and "none was loaded" in caught.value.message


def test_same_tool_on_different_servers_is_not_a_duplicate_but_a_reused_pack_name_is():
    packs = load_packs([], [("one", _pack(_entry("delete_contact", server="crm"), _entry("delete_contact")))])
    assert len(packs.entries) == 2
    with pytest.raises(PackError, match="the pack name 'p' is already used by one"):
        load_packs([], [("one", _pack(_entry("a"))), ("two", _pack(_entry("b")))])


def test_lookup_takes_the_most_specific_entry():
    # given a glob for any server, a glob for crm, and an exact name for any server
    packs = load_packs(
        [],
        [
            (
                "p",
                _pack(
                    _entry("delete_*", "any_glob"),
                    _entry("delete_*", "crm_glob", server="crm"),
                    _entry("delete_contact", "exact"),
                ),
            )
        ],
    )
    # then an exact name beats a glob, and a server-limited glob beats one for any server
    assert packs.inverse_for("crm", "delete_contact").inverse.tool == "exact"
    assert packs.inverse_for("crm", "delete_note").inverse.tool == "crm_glob"
    assert packs.inverse_for("mail", "delete_note").inverse.tool == "any_glob"
    assert packs.inverse_for("crm", "create_note") is None


def test_two_equally_specific_globs_for_one_tool_are_refused_at_lookup():
    packs = load_packs([], [("p", _pack(_entry("delete_*", "a"), _entry("*_contact", "b")))])
    assert packs.conflicts("crm", ["delete_contact", "delete_note"]) == [
        "tool 'delete_contact' on server 'crm' is covered by 2 equally specific compensation pack entries "
        "(p entries[0], p entries[1]); an undo must not have to choose: narrow one (an exact tool name or a server)"
    ]
    with pytest.raises(PackError):
        packs.inverse_for("crm", "delete_contact")


def test_pack_entries_translate_to_mcp_contract_templates():
    create, delete, _ = load_packs([TOYBOX_PACK]).entries
    # the mapping: $.args -> ${input}, $.result -> ${result}, $.pre_state -> ${pre_state}
    assert create.as_mcp_contract_parts() == {
        "compensation": {"tool": "delete_contact", "arguments": {"id": "${result.id}"}}
    }
    parts = delete.as_mcp_contract_parts()
    assert parts["capture"] == {"tool": "get_contact", "arguments": {"id": "${input.id}"}}
    assert parts["compensation"]["arguments"]["company"] == "${pre_state.company}"
    # and the templates are ones the registry accepts where a contract puts them
    assert template_problems(parts["compensation"], "compensation", allow_result=True, allow_pre_state=True) == []
    assert template_problems(parts["capture"], "capture", allow_result=False) == []


def test_in_force_without_captures_keeps_only_capture_less_entries():
    packs = load_packs([TOYBOX_PACK])
    assert [entry.tool for entry in packs.in_force(capture_enabled=False).entries] == ["create_contact"]
    assert packs.in_force(capture_enabled=True) is packs


def test_entries_the_servers_cannot_use_are_named_and_give_no_inverse():
    packs = load_packs([TOYBOX_PACK])
    # given a server without get_contact (the capture of delete and update) and another with no contact tools
    offered = {"toybox": ["create_contact", "delete_contact", "update_contact"], "mail": ["send_email"]}
    warnings = packs.unusable(offered)
    # then the two entries needing the capture are named, with what is missing; the create stays usable
    assert len(warnings) == 2 and all("server 'toybox' has no tool 'get_contact'" in w for w in warnings)
    assert "entries[1]" in warnings[0] and "cannot be undone" in warnings[0]
    assert packs.usable_for("toybox", "delete_contact", offered["toybox"]) is None
    assert packs.usable_for("toybox", "create_contact", offered["toybox"]) is not None
    assert packs.usable_for("toybox", "delete_contact", None) is not None  # not listed yet: not judged
    # and an entry whose tool no server offers is named too (a typo in the pack)
    typo = load_packs([], inline=[("inline", _pack(_entry("craete_contact", "delete_contact")))])
    assert typo.unusable(offered) == [
        "inline entries[0]: no connected server offers a tool matching 'craete_contact', so the entry is unused. "
        "Check the tool name (a typo?) or the server it names"
    ]
    # a server that is down is not judged
    assert load_packs([], inline=[("i", _pack(_entry("x", server="down")))]).unusable(offered) == []


def test_empty_pack_set_declares_nothing():
    assert PackSet().inverse_for("s", "t") is None and PackSet().uncovered("s", ["t"]) == ["t"]


MEMORY_LIKE = {
    "name": "memory-like",
    "description": "Beyond Sagaz: list projections and constants.",
    "entries": [
        {
            "tool": "create_entities",
            "note": "the answer lists only the entities it created; deleting exactly those undoes it",
            "inverse": {"tool": "delete_entities", "args": {"entityNames": "$.result.entities[*].name"}},
        },
        {
            "tool": "archive",
            "inverse": {"tool": "set_state", "args": {"id": "$.args.id", "state": {"const": "active"}}},
        },
    ],
}


def test_a_list_projection_and_a_constant_translate_to_contract_templates():
    pack = parse_pack(MEMORY_LIKE, "memory-like.json")
    projected, constant = (entry.as_mcp_contract_parts()["compensation"] for entry in pack.entries)
    assert projected == {"tool": "delete_entities", "arguments": {"entityNames": "${result.entities[*].name}"}}
    assert constant == {"tool": "set_state", "arguments": {"id": "${input.id}", "state": "active"}}
    assert template_problems(projected["arguments"], "compensation.arguments", allow_result=True) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"const": "${result.id}"}, "a constant holds no template"),
        ({"const": 1, "other": 2}, 'exactly {"const": <any JSON value>}'),
        ("$.result.entities[0].name", "is not a reference"),
        ("$.result.entities[*", "is not a reference"),
    ],
)
def test_bad_constants_and_projections_are_refused_naming_the_path(value: Any, expected: str):
    document = {**MEMORY_LIKE, "entries": [{"tool": "t", "inverse": {"tool": "u", "args": {"x": value}}}]}
    with pytest.raises(PackError) as refused:
        parse_pack(document, "bad.json")
    assert "bad.json: entries[0].inverse.args.x:" in refused.value.message and expected in refused.value.message
