"""Gates: a matching tool rule (first in file order) beats the operator's class map, which beats the factory map
(I -> confirm, everything else allow); tenant- and client-scoped rules apply only to their tenant or client; hide
also hides the tool."""

from __future__ import annotations

import pytest

from governance.policy.gates import GatePolicy, GateRule, gate_for, hidden
from sagas.protocols.proxy.config import load_proxy_config
from tests.proxy.conftest import SAGAZ


@pytest.mark.parametrize(
    ("effect_class", "action"),
    [("read", "allow"), ("R", "allow"), ("C", "allow"), ("I", "confirm"), ("unknown", "allow")],
)
def test_factory_map_holds_irreversible_calls_only(effect_class: str, action: str):
    decision = gate_for(effect_class, "some_tool", "s", "acme", "claude", GatePolicy())
    assert (decision.action, decision.source) == (action, "default")
    assert decision.reason == f"class {effect_class}; default policy: class {effect_class} -> {action}"


def test_class_map_overrides_the_factory_map_key_by_key():
    # given an operator map that switches the guardian off and confirms unknowns
    policy = GatePolicy(by_class={"I": "allow", "unknown": "confirm"})
    # then those two classes follow it and the rest keeps the factory map
    assert gate_for("I", "t", "s", "", "", policy).action == "allow"
    assert gate_for("unknown", "t", "s", "", "", policy).source == "class_map"
    assert gate_for("C", "t", "s", "", "", policy).source == "default"


def test_tool_rule_beats_the_class_map_and_the_first_match_wins():
    # given a block on the whole bank, carved out for one tool by a rule above it
    policy = GatePolicy(
        by_class={"I": "block"},
        tools=(
            GateRule(action="confirm", tool="transfer_funds", server="bank", reason="payroll needs a human"),
            GateRule(action="block", tool="*", server="bank"),
        ),
    )
    # then the exception applies first, the general rule to the rest of the bank, the class map elsewhere
    assert gate_for("I", "transfer_funds", "bank", "", "", policy).reason == "payroll needs a human"
    assert gate_for("read", "get_balance", "bank", "", "", policy).action == "block"
    other = gate_for("I", "transfer_funds", "crm", "", "", policy)
    assert (other.action, other.source) == ("block", "class_map")


def test_generated_reason_names_the_rule_and_its_filters():
    policy = GatePolicy(tools=(GateRule(action="hide", tool="drop_*", server="db", effect_class="I"),))
    decision = gate_for("I", "drop_table", "db", "", "", policy)
    assert decision == type(decision)("hide", "tool_rule", "policy.tools[0] (tool drop_* server db class I) -> hide")


def test_tenant_scoped_rule_applies_only_to_that_tenant():
    policy = GatePolicy(tools=(GateRule(action="block", effect_class="C", tenant="acme"),))
    assert gate_for("C", "send_email", "mail", "acme", "", policy).action == "block"
    assert gate_for("C", "send_email", "mail", "globex", "", policy).action == "allow"
    assert gate_for("R", "create_contact", "crm", "acme", "", policy).action == "allow"


def test_client_scoped_rule_applies_only_to_that_client():
    policy = GatePolicy(tools=(GateRule(action="confirm", tool="delete_*", client="claude-code"),))
    assert gate_for("unknown", "delete_contact", "crm", "acme", "claude-code", policy).action == "confirm"
    assert gate_for("unknown", "delete_contact", "crm", "acme", "cursor", policy).action == "allow"


def test_hide_leaves_the_tool_out_of_the_list_and_nothing_else_does():
    policy = GatePolicy(by_class={"I": "hide"}, tools=(GateRule(action="block", tool="send_*"),))
    assert hidden("I", "transfer_funds", "bank", "acme", "c", policy)
    assert not hidden("C", "send_email", "mail", "acme", "c", policy)  # blocked, but listed
    assert not hidden("read", "get_contact", "crm", "acme", "c", policy)


def test_unknown_class_waits_for_an_operator():
    # a class this code does not know (a newer classifier) must not flow unseen
    assert gate_for("X", "t", "s", "", "", GatePolicy()).action == "confirm"


def test_sagaz_documented_policy_gates_as_sagaz_says():
    # given Sagaz's documented policy: class I -> block, unknown -> confirm, transfer_funds on bank -> confirm,
    # send_* -> confirm
    gates = load_proxy_config(SAGAZ / "sagaz.guardian.config.json").gates
    # then the tool rules win over the class map, and the class map over the factory map
    assert gate_for("I", "transfer_funds", "bank", "", "", gates).action == "confirm"
    assert gate_for("I", "wipe_disk", "bank", "", "", gates).action == "block"
    assert gate_for("C", "send_email", "crm", "", "", gates).action == "confirm"
    assert gate_for("unknown", "update_contact", "crm", "", "", gates).action == "confirm"
    assert gate_for("R", "create_contact", "crm", "", "", gates).source == "default"
