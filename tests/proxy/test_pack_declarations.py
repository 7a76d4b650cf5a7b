"""A compensation pack may say a tool has no inverse, and why (class C or I): the proxy classes the tool so, below
the configuration's explicit rules and above its own guesses, and the ledger and the undo say it with the pack's
reason. A real session: the official client through the journaled proxy against the demo world over HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from registry.packs import PackError, PackSet, parse_pack
from registry.tool_classes import ClassRule, classify
from tests.proxy.demo_session import command, through_the_proxy, two_contacts
from tests.proxy.harness import HttpDownstream

pytestmark = pytest.mark.django_db(transaction=True)
DECLARING = {
    "name": "demo-no-way-back",
    "description": "What the demo world cannot take back.",
    "entries": [
        {"tool": "send_email", "class": "I", "reason": "a sent email is read at once; nothing recalls it"},
        {"tool": "post_*", "class": "C", "reason": "a post can be edited afterwards, not unposted"},
    ],
}


@pytest.fixture(autouse=True)
def _acme(settings: Any) -> None:
    settings.SAGA_DEFAULT_TENANT = "acme"  # the commands act as the local operator of the proxy's tenant


def test_a_declaration_loads_and_the_most_specific_one_answers():
    pack = parse_pack(DECLARING, "declaring.json")
    assert [(d.tool, d.effect_class) for d in pack.declarations] == [("send_email", "I"), ("post_*", "C")]
    assert pack.entries == ()
    packs = PackSet((pack,))
    assert packs.declared_for("demo", "post_tweet").effect_class == "C"  # type: ignore[union-attr]
    assert packs.declared_for("demo", "get_contact") is None


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"tool": "x", "class": "R", "reason": "r"}, "entries[0].class: 'R'"),
        ({"tool": "x", "class": "I"}, "entries[0]: 'reason' is missing"),
        ({"tool": "x", "class": "I", "reason": "  "}, "entries[0].reason: say why"),
        (
            {"tool": "x", "class": "I", "reason": "r", "inverse": {"tool": "y", "args": {}}},
            "entries[0]: an entry either declares an inverse or says there is none",
        ),
    ],
)
def test_a_bad_declaration_is_refused_naming_the_path(entry: dict[str, Any], expected: str):
    with pytest.raises(PackError) as refused:
        parse_pack({**DECLARING, "entries": [entry]}, "bad.json")
    assert f"bad.json: {expected}" in refused.value.message


def test_a_declaration_is_below_the_rules_and_above_the_guesses():
    declared = ("I", 'pack "p": no inverse: gone for good')
    found = classify("send_email", "demo", None, [], False, declared_class=declared)
    assert (found.effect_class, found.source, found.reason) == ("I", "pack", declared[1])
    rule = ClassRule(tool="send_email", effect_class="C", reason="ops say C")
    assert classify("send_email", "demo", None, [rule], False, declared_class=declared).source == "rule"


def test_a_proxied_call_is_classed_and_undone_as_its_pack_declares(tmp_path: Path, demo_http: HttpDownstream):
    pack = tmp_path / "declaring.json"
    pack.write_text(json.dumps(DECLARING))
    two_contacts(demo_http)
    email = ("send_email", {"to": "ada@example.com", "subject": "Hi", "body": "Hello"})
    through_the_proxy(tmp_path, demo_http, [email], packs=[str(pack)])
    row = json.loads(command("ledger", "--json").splitlines()[0])
    assert (row["class"], row["class_source"]) == ("I", "pack")
    assert (
        row["class_reason"] == 'pack "demo-no-way-back": no inverse: a sent email is read at once; nothing recalls it'
    )
    plan = json.loads(command("undo", "--dry-run", "--json"))
    assert [(item["tool"], item["verdict"]) for item in plan["items"]] == [("send_email", "no_way_back")]


def test_the_more_guarded_reading_wins_a_tie_and_a_more_specific_declaration_wins_a_glob_inverse():
    glob_inverse = {"tool": "send_*", "inverse": {"tool": "unsend", "args": {"id": "$.result.id"}}}
    exact_declared = {"tool": "send_email", "class": "I", "reason": "gone for good"}
    packs = PackSet((parse_pack({**DECLARING, "entries": [glob_inverse, exact_declared]}, "p.json"),))
    assert packs.usable_for("demo", "send_email", None) is None  # no inverse: the declaration is more specific
    assert packs.declared_for("demo", "send_email").effect_class == "I"  # type: ignore[union-attr]
    assert packs.usable_for("demo", "send_sms", None) is not None  # the glob still covers the rest


def test_two_equally_specific_declarations_are_a_conflict():
    tied = [{"tool": "create_*", "class": "I", "reason": "a"}, {"tool": "*_entities", "class": "C", "reason": "b"}]
    packs = PackSet((parse_pack({**DECLARING, "entries": tied}, "p.json"),))
    assert packs.conflicts("memory", ["create_entities"]) != []
    with pytest.raises(PackError):
        packs.declared_for("memory", "create_entities")


def test_a_declaration_no_server_matches_is_warned_about():
    packs = PackSet((parse_pack({**DECLARING, "entries": [{"tool": "sned_email", "class": "I", "reason": "r"}]}, "p"),))
    assert any("matching 'sned_email'" in warning for warning in packs.unusable({"demo": ["send_email"]}))
