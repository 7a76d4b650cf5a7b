"""Classifying downstream tools: the cascade rule -> declared compensation -> readOnlyHint -> name heuristics ->
unknown, each answer with its recorded source; the heuristic table row by row, and the traps."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client

from registry.packs import load_packs
from registry.tool_classes import ClassRule, classify, name_words
from sagas.protocols.proxy.config import load_proxy_config
from tests.proxy.conftest import EXAMPLES, load_demo_world

HEURISTIC_TABLE = [
    *[(f"{verb}_things", "read") for verb in ("list", "get", "read", "search", "find", "fetch", "query")],
    *[(f"{verb}_things", "read") for verb in ("describe", "show", "count", "check", "view")],
    ("create_contact", "unknown"),  # R only from a declared inverse, never from a name
    *[(f"{verb}_update", "C") for verb in ("send", "post", "publish", "notify", "message", "reply", "comment")],
    *[(f"{verb}_it", "I") for verb in ("transfer", "pay", "charge", "execute", "drop", "wipe", "purge", "destroy")],
    *[(f"{verb}_contact", "unknown") for verb in ("update", "delete", "remove", "set", "patch", "put", "run")],
    # a mutating verb after a read verb, anywhere in the name
    ("get_or_create_user", "unknown"),
    ("search_and_destroy", "unknown"),
    ("listAndDelete", "unknown"),
    # the first word of the last segment, whatever the namespace separator and casing
    ("gmail.sendEmail", "C"),
    ("crm__list_contacts", "read"),
    ("bank/transfer-funds", "I"),
    ("crm:createContact", "unknown"),
    ("DropTable", "I"),
]


@pytest.mark.parametrize(("tool", "expected"), HEURISTIC_TABLE, ids=[tool for tool, _ in HEURISTIC_TABLE])
def test_name_heuristic_table(tool: str, expected: str):
    # given an unannotated tool, no rule and no declared inverse
    # when it is classified
    classification = classify(tool, "s", None, [], False)
    # then its first word decides, and the source says so
    assert (classification.effect_class, classification.source) == (expected, "heuristic")


@pytest.mark.parametrize("tool", ["frobnicate_widget", "HTTPGetURL", ""])
def test_name_without_a_known_first_word_is_unknown_by_default(tool: str):
    # a read verb that is not the first word does not count ("http" comes first)
    classification = classify(tool, "s", None, [], False)
    assert (classification.effect_class, classification.source) == ("unknown", "default")
    assert repr(tool) in classification.reason


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("gmail.sendEmail", ["send", "email"]),
        ("crm__list_contacts", ["list", "contacts"]),
        ("DropTable", ["drop", "table"]),
        ("getHTTPResponse", ["get", "http", "response"]),
        ("a/b:c.d__e-f_g", ["e", "f", "g"]),
        ("", []),
    ],
)
def test_name_words(name: str, words: list[str]):
    assert name_words(name) == words


@pytest.mark.parametrize(
    ("tool", "annotations", "expected"),
    [
        ("delete_all_users", {"readOnlyHint": True}, "unknown"),
        ("delete_everything", {"readOnlyHint": True, "destructiveHint": False}, "unknown"),
        ("purge_cache", {"readOnlyHint": True}, "I"),
        ("wipeCache", {"readOnlyHint": True, "destructiveHint": False}, "I"),
        ("send_report", {"readOnlyHint": True}, "C"),
        ("create_user", {"readOnlyHint": True}, "unknown"),
        ("users_delete", {"readOnlyHint": True}, "unknown"),
        ("purge.cache", {"readOnlyHint": True}, "unknown"),
        ("users.delete_all.status", {"readOnlyHint": True}, "unknown"),
        ("crm__wipe/records", {"readOnlyHint": True}, "unknown"),
        ("get_or_create_user", {"readOnlyHint": True}, "unknown"),
        ("transfer_funds", {"destructiveHint": False}, "I"),
    ],
)
def test_trap_an_annotation_never_makes_a_call_less_guarded_than_its_name(
    tool: str, annotations: dict[str, Any], expected: str
):
    # given a tool whose name holds a mutating verb but whose server claims it is harmless
    classification = classify(tool, "s", annotations, [], False)
    # then the name decides (a read or R by name becomes unknown), and the reason says the claim was not believed
    assert classification.effect_class == expected
    if annotations.get("readOnlyHint"):
        assert "never makes a call less guarded than its name" in classification.reason


def test_read_only_hint_decides_a_name_without_a_mutating_verb():
    classification = classify("weather_report", "s", {"readOnlyHint": True}, [], False)
    assert (classification.effect_class, classification.source) == ("read", "annotation")


def test_trap_an_operator_rule_overrides_a_lying_read_only_hint():
    rules = [ClassRule(tool="delete_everything", effect_class="I", reason="it deletes, whatever it says")]
    classification = classify("delete_everything", "s", {"readOnlyHint": True}, rules, False)
    assert classification == type(classification)("I", "rule", "it deletes, whatever it says")


def test_trap_unannotated_transfer_funds_is_irreversible():
    classification = classify("transfer_funds", "bank", None, [], False)
    assert (classification.effect_class, classification.source) == ("I", "heuristic")


def test_cascade_rule_beats_a_declared_inverse():
    rules = [ClassRule(tool="delete_*", effect_class="C", server="crm")]
    classification = classify("delete_contact", "crm", None, rules, True)
    assert (classification.effect_class, classification.source) == ("C", "rule")
    assert classification.reason == "rules[0] crm/delete_* -> C"


def test_cascade_declared_inverse_beats_annotations_and_the_destructive_cap():
    # given a destructive delete whose inverse a pack declares
    classification = classify(
        "delete_contact", "crm", {"destructiveHint": True, "readOnlyHint": True}, [], True, inverse_source='pack "crm"'
    )
    # then it is R by the declaration (the cap only limits a name-based R)
    assert (classification.effect_class, classification.source) == ("R", "declared_compensation")
    assert classification.reason.startswith('pack "crm" declares the inverse')


def test_cascade_read_only_hint_beats_a_name_that_decides_nothing():
    classification = classify("contacts", "s", {"readOnlyHint": True}, [], False)
    assert (classification.effect_class, classification.source) == ("read", "annotation")


@pytest.mark.parametrize(
    ("tool", "annotations", "expected"),
    [
        ("create_contact", {"destructiveHint": True}, ("unknown", "heuristic")),
        ("create_contact", {"destructiveHint": False}, ("unknown", "heuristic")),
        ("transfer_funds", {"destructiveHint": True}, ("I", "heuristic")),
        ("send_email", {"destructiveHint": True}, ("C", "heuristic")),
    ],
)
def test_destructive_hint_lowers_nothing_and_a_name_never_says_r(
    tool: str, annotations: dict[str, Any], expected: tuple[str, str]
):
    classification = classify(tool, "s", annotations, [], False)
    assert (classification.effect_class, classification.source) == expected


@pytest.mark.parametrize("claim", ["true", 1, None])
def test_only_a_literal_true_counts_as_a_hint(claim: Any):
    classification = classify("delete_contact", "s", {"readOnlyHint": claim}, [], False)
    assert classification.effect_class == "unknown"


def test_python_spelled_annotations_count_too():
    classification = classify("contact_card", "s", {"read_only_hint": True}, [], False)
    assert (classification.effect_class, classification.source) == ("read", "annotation")


def test_rules_match_globs_and_servers_first_in_file_order():
    rules = [
        ClassRule(tool="*_draft", effect_class="R", server="docs"),
        ClassRule(tool="*_draft", effect_class="C"),
        ClassRule(tool="delete_draft", effect_class="I"),
    ]
    # the server-limited rule only for its server; then the first matching rule, not the most specific
    assert classify("delete_draft", "docs", None, rules, False).effect_class == "R"
    assert classify("delete_draft", "mail", None, rules, False).effect_class == "C"
    assert classify("delete_post", "docs", None, rules, False).source == "heuristic"


def test_demo_world_is_classified_by_its_pack_annotations_names_and_rule():
    # given the demo world's real tool list (in-process) and the example proxy configuration
    config = load_proxy_config(EXAMPLES / "proxy.json")
    world = load_demo_world()

    async def tools() -> list[Any]:
        async with Client(world.build_server(world.World())) as client:
            return list((await client.list_tools()).tools)

    # when every tool is classified as the proxy will
    classes = {}
    for tool in anyio.run(tools):
        annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None
        declared = config.packs.inverse_for("demo", tool.name) is not None
        found = classify(tool.name, "demo", annotations, config.rules, declared)
        classes[tool.name] = (found.effect_class, found.source)
    # then
    assert classes == {
        "get_contact": ("read", "annotation"),
        "list_contacts": ("read", "annotation"),
        "create_contact": ("R", "declared_compensation"),
        "update_contact": ("R", "declared_compensation"),
        "delete_contact": ("R", "declared_compensation"),
        "send_email": ("C", "heuristic"),
        "post_tweet": ("C", "heuristic"),
        "list_timeline": ("read", "annotation"),
        "transfer_funds": ("I", "rule"),
        "get_call_log": ("read", "annotation"),
    }


def test_pack_without_capture_no_longer_declares_what_needs_one():
    # given the demo pack with captures switched off ("capture": false)
    packs = load_packs([EXAMPLES / "demo_pack.json"]).in_force(capture_enabled=False)
    # then only create_contact (whose inverse needs no pre-state) stays declared
    assert [
        name for name in ("create_contact", "update_contact", "delete_contact") if packs.inverse_for("d", name)
    ] == ["create_contact"]


@pytest.mark.parametrize(
    ("tool", "annotations"),
    [
        ("cancel_order", {"readOnlyHint": True}),
        ("refund_payment", {"readOnlyHint": True}),
        ("find_and_replace", {}),
        ("approve_request", {"readOnlyHint": True}),
        ("deploy_service", {}),
    ],
)
def test_a_tool_whose_name_holds_a_mutating_verb_is_never_read(tool: str, annotations: dict[str, Any]):
    # given a name with a verb that changes the world (anywhere in it), however the server annotates it
    classification = classify(tool, "s", annotations, [], False)
    # then it is not a read, so it is never journaled behind its answer (write-ahead holds)
    assert classification.effect_class != "read"
