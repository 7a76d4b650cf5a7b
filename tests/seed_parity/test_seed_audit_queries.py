"""Audit queries written against semantic-saga-mcp find our events (its docs/observability_audit.md and README:
`get_audit_events` with `event_types`, `get_policy_decisions`, `verify_audit_chain`): its event names, its
POLICY_DECISION casing, `null` for an absent field, and the small `data` facts its events carry. Driven over MCP
against a real `serve` with the seed governance job's policy, as its client would; REST and the console accept
the same names."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp import Client

from audit.canonical import sha256_hex
from registry.defaults import register_defaults
from tests.protocols.conftest import ALICE, MALLORY
from tests.protocols.mcp_client import call
from tests.seed_parity.answers_server import AnswersServer, governed_answers_server, run_as
from tests.seed_parity.seed_ci_harness import seed_policy

# acme: the seed governance job's tenant policy (approval from low risk up, one node at a time), so a planned node
# waits for its approver; globex: everything allowed, so a step can be executed directly.
POLICY = seed_policy("seed-audit-1")
POLICY["tenants"] = {"acme": POLICY["tenants"]["*"], "globex": {"default_effect": "allow"}}


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    register_defaults()


@pytest.fixture(scope="module")
def server(
    django_db_setup: None, django_db_blocker: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AnswersServer]:
    with governed_answers_server(tmp_path_factory.mktemp("seed-audit"), POLICY) as running:
        yield running


async def _events(client: Client, saga_id: str, *names: str) -> list[dict[str, Any]]:
    return (await call(client, "get_audit_events", {"saga_id": saga_id, "event_types": list(names)}))["events"]


def _run(server: AnswersServer, scenario: Any, token: str = ALICE) -> Any:
    return run_as(server, token, scenario)


async def _approved_and_run(client: Client, saga_id: str, name: str, reason: str | None = None) -> dict[str, Any]:
    node = await call(
        client,
        "plan_saga_step",
        {"saga_id": saga_id, "action": "create_text_file", "input": {"path": f"{name}.txt", "content": name}},
    )
    decision: dict[str, Any] = {"saga_id": saga_id, "node_id": node["id"], "approved": True}
    if reason:
        decision["reason"] = reason
    await call(client, "approve_saga_step", decision)
    await call(client, "run_ready_steps", {"saga_id": saga_id, "max_parallel": 1})
    return node


def test_the_seeds_action_query_finds_our_step_events_with_its_names_and_facts(server: AnswersServer):
    async def scenario(client: Client) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        # given a saga with one step executed directly, as the seed's README walks it
        sid = (await call(client, "begin_saga", {"metadata": {"case": "audit"}}))["id"]
        await call(
            client,
            "execute_saga_step",
            {"saga_id": sid, "action": "create_text_file", "input": {"path": "audit-one.txt", "content": "one"}},
        )
        # when the seed's audit report asks for its action events
        actions = await _events(client, sid, "ACTION_COMPLETED", "ACTION_REQUESTED")
        return actions, (await call(client, "get_audit_events", {"saga_id": sid}))["events"]

    actions, every = _run(server, scenario, MALLORY)
    # then it finds them (the seed answers 2 for this saga), each carrying the seed's name beside ours
    assert [(e["seed_name"], e["event_type"]) for e in actions] == [
        ("ACTION_REQUESTED", "STEP_STARTED"),
        ("ACTION_COMPLETED", "STEP_COMPLETED"),
    ]
    completed = actions[1]
    assert completed["action"] == "create_text_file" and completed["step_id"] and completed["status"] == "COMPLETED"
    assert completed["data"]["attempts"] == 1 and completed["data"]["retry_count"] == 0
    # and a field the event does not have is null, as the seed answers it, never ""
    started = next(e for e in every if e["event_type"] == "SAGA_STARTED")
    assert started["action"] is None and started["step_id"] is None and started["node_id"] is None
    assert all("" not in (e["action"], e["step_id"], e["node_id"], e["status"]) for e in every)
    assert {e["seed_name"] for e in every} >= {"SAGA_STARTED", "POLICY_DECISION", "ACTION_REQUESTED"}


def test_a_workflow_nodes_step_is_an_attempt_summary_not_an_action_request(server: AnswersServer):
    async def scenario(client: Client) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        # given a saga that ran one approved node
        sid = (await call(client, "begin_saga", {}))["id"]
        await _approved_and_run(client, sid, "audit-node", reason="looked at it")
        # when the seed's action query and its attempt summaries are asked for
        return (
            await _events(client, sid, "ACTION_REQUESTED", "ACTION_COMPLETED"),
            (await call(client, "get_audit_events", {"saga_id": sid}))["events"],
        )

    actions, every = _run(server, scenario)
    # then, as the seed records a node's run, there is no ACTION_REQUESTED/COMPLETED, only the attempt summary
    assert actions == []
    names = {e["event_type"]: e["seed_name"] for e in every}
    assert names["STEP_COMPLETED"] == "ACTION_ATTEMPT_SUMMARY" and names["STEP_STARTED"] is None
    assert names["SAGA_STARTED"] == "SAGA_STARTED" and names["NODE_PLANNED"] == "WORKFLOW_NODE_PLANNED"
    assert names["APPROVAL_GRANTED"] == "APPROVAL_DECIDED" and names["RUN_REQUESTED"] == "WORKFLOW_RUN_REQUESTED"
    assert names["NODE_COMPLETED"] == "WORKFLOW_NODE_COMPLETED" and names["APPROVAL_REQUESTED"] is None


def test_workflow_approval_and_policy_events_answer_the_seeds_names_casing_and_data(server: AnswersServer):
    async def scenario(client: Client) -> dict[str, list[dict[str, Any]]]:
        sid = (await call(client, "begin_saga", {}))["id"]
        await _approved_and_run(client, sid, "audit-two")
        found = {
            name: await _events(client, sid, name)
            for name in (
                "WORKFLOW_NODE_PLANNED",
                "WORKFLOW_NODE_COMPLETED",
                "WORKFLOW_RUN_REQUESTED",
                "APPROVAL_DECIDED",
                "ACTION_ATTEMPT_SUMMARY",
            )
        }
        found["decisions"] = (await call(client, "get_policy_decisions", {"saga_id": sid}))["events"]
        found["run_completed"] = await _events(client, sid, "WORKFLOW_RUN_COMPLETED")
        return found

    found = _run(server, scenario)
    [planned] = found["WORKFLOW_NODE_PLANNED"]
    assert planned["data"]["dependency_count"] == 0 and planned["data"]["approval_required"] is True
    [completed] = found["WORKFLOW_NODE_COMPLETED"]
    assert completed["event_type"] == "NODE_COMPLETED" and completed["data"]["attempts"] == 1
    assert completed["data"]["uncertain_outcome"] is False
    [run] = found["WORKFLOW_RUN_REQUESTED"]
    assert run["data"]["max_parallel"] == 1 and isinstance(run["data"]["max_steps"], int)
    [decided] = found["APPROVAL_DECIDED"]
    assert decided["data"]["decision"] == "approved" and decided["data"]["reason_present"] is False
    assert [e["event_type"] for e in found["ACTION_ATTEMPT_SUMMARY"]] == ["STEP_COMPLETED"]
    # a seed name for a moment we do not record is accepted, and finds nothing (docs/observability.md says why)
    assert found["run_completed"] == []
    # POLICY_DECISION in the seed's casing, with its prospective counters and approval flag
    decisions = [e for e in found["decisions"] if e["event_type"] == "POLICY_DECISION"]
    assert {e["status"] for e in decisions} <= {"ALLOW", "DENY", "REQUIRE_APPROVAL"}
    by_phase = {e["data"]["phase"]: e for e in decisions}
    plan = by_phase["plan"]["data"]
    assert (plan["prospective_planned_nodes"], plan["prospective_steps"]) == (1, 0)
    assert plan["prospective_risk_units"] >= 1 and plan["approval_granted"] is False
    assert by_phase["plan"]["status"] == "REQUIRE_APPROVAL" and by_phase["plan"]["action"] == "create_text_file"
    control = next(e["data"] for e in decisions if e["data"]["phase"] == "run" and not e["action"])
    assert control["requested_max_parallel"] == 1 and control["approval_granted"] is True
    node_run = next(e["data"] for e in decisions if e["data"]["phase"] == "run" and e["action"])
    assert node_run["approval_granted"] is True and node_run["prospective_steps"] == 1


def test_a_rollback_answers_compensation_results_and_its_tally(server: AnswersServer):
    async def scenario(client: Client) -> tuple[list[dict[str, Any]], ...]:
        sid = (await call(client, "begin_saga", {}))["id"]
        await _approved_and_run(client, sid, "undo-one", reason="fine")
        await call(client, "rollback_saga", {"saga_id": sid})
        return (
            await _events(client, sid, "COMPENSATION_RESULT"),
            await _events(client, sid, "ROLLBACK_REQUESTED", "ROLLBACK_COMPLETED", "ROLLBACK_FAILED"),
            await _events(client, sid, "POLICY_SAFETY_OVERRIDE"),
        )

    compensations, rollback, overrides = _run(server, scenario)
    [result] = compensations
    assert result["event_type"] == "COMPENSATION_COMPLETED" and result["status"] == "COMPENSATED"
    assert result["data"]["attempts"] == 1 and result["seed_name"] == "COMPENSATION_RESULT"
    assert [e["event_type"] for e in rollback] == ["ROLLBACK_REQUESTED", "ROLLBACK_COMPLETED"]
    assert rollback[1]["data"] == {"compensated_steps": 1, "failed_steps": 0}
    [override] = overrides
    assert override["status"] == "ROLLBACK_SAFETY_PATH" and override["data"]["phase"] == "rollback"


def test_an_unknown_event_type_is_refused_with_the_closest_name(server: AnswersServer):
    async def scenario(client: Client) -> tuple[str, str, list[dict[str, Any]]]:
        sid = (await call(client, "begin_saga", {}))["id"]
        typo = await client.call_tool("get_audit_events", {"saga_id": sid, "event_types": ["ACTION_COMPLETD"]})
        node_typo = await client.call_tool(
            "get_audit_events", {"saga_id": sid, "event_types": ["WORKFLOW_NODE_COMPLETD"]}
        )
        assert typo.is_error and node_typo.is_error
        # a name repeated a thousand times is one name (the seed de-duplicates its filter too)
        repeated = await _events(client, sid, *(["SAGA_STARTED"] * 1000), *(["ACTION_COMPLETED"] * 1000))
        return typo.content[0].text, node_typo.content[0].text, repeated

    typo, node_typo, repeated = _run(server, scenario)
    assert "'ACTION_COMPLETD' is not an audit event type" in typo and "Did you mean ACTION_COMPLETED?" in typo
    assert "Did you mean WORKFLOW_NODE_COMPLETED?" in node_typo
    assert [e["event_type"] for e in repeated] == ["SAGA_STARTED"]


def test_an_answered_event_rehashes_to_its_event_hash_by_the_documented_rule(server: AnswersServer):
    async def scenario(client: Client) -> list[dict[str, Any]]:
        sid = (await call(client, "begin_saga", {}))["id"]
        await _approved_and_run(client, sid, "rehash")
        return (await call(client, "get_audit_events", {"saga_id": sid}))["events"]

    events = _run(server, scenario)
    previous = None
    for event in events:
        # docs/audit_hash.md: drop the chain links, sequence and seed_name; an absent (null) text field is ""
        body = {k: ("" if v is None else v) for k, v in event.items() if k not in _NOT_HASHED}
        body["tenant_id"] = "acme"  # stored and hashed, not answered (the caller's tenant)
        assert sha256_hex({"previous_hash": previous, "event": body}) == event["event_hash"]
        previous = event["event_hash"]


_NOT_HASHED = {"sequence", "previous_hash", "event_hash", "seed_name"}


def test_rest_accepts_the_seeds_names(server: AnswersServer):
    async def scenario(client: Client) -> str:
        sid = (await call(client, "begin_saga", {}))["id"]
        await _approved_and_run(client, sid, "rest-one")
        return sid

    sid = _run(server, scenario)
    with httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {ALICE}"}) as rest:
        answer = rest.get(
            f"/api/v1/sagas/{sid}/audit-events/",
            params=[("event_types", "ACTION_ATTEMPT_SUMMARY"), ("event_types", "WORKFLOW_NODE_COMPLETED")],
        ).raise_for_status()
        unknown = rest.get(f"/api/v1/sagas/{sid}/audit-events/", params=[("event_types", "NOPE")])
    assert [e["event_type"] for e in answer.json()["events"]] == ["STEP_COMPLETED", "NODE_COMPLETED"]
    assert unknown.status_code == 400 and "not an audit event type" in unknown.text
