"""What a semantic-saga-mcp client reads from governed work (its README's "Policy and governance" and
docs/policy_governance.md): a risk threshold that gates planning, a parallelism budget refused in the seed's words,
the decisions under `events` with their revision, the policy status, and another tenant told the saga is not
found."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client

from registry.defaults import register_defaults
from tests.protocols.conftest import ALICE, MALLORY, VERA
from tests.protocols.mcp_client import call
from tests.seed_parity.answers_server import AnswersServer, governed_answers_server, run_as
from tests.seed_parity.seed_ci_harness import seed_policy

REVISION = "seed-answers-1"
POLICY = seed_policy(REVISION)


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    register_defaults()


@pytest.fixture(scope="module")
def server(
    django_db_setup: None, django_db_blocker: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AnswersServer]:
    with governed_answers_server(tmp_path_factory.mktemp("governed"), POLICY) as running:
        yield running


def test_governed_planning_budget_and_decision_evidence_read_as_the_seed_reads_them(server: AnswersServer):
    async def operator(client: Client) -> tuple[str, str, dict[str, Any]]:
        # given a planned low-risk node, which the threshold gates
        sid = (await call(client, "begin_saga", {}))["id"]
        planned = await call(
            client,
            "plan_saga_step",
            {"saga_id": sid, "action": "create_text_file", "input": {"path": "ci.txt", "content": "governed"}},
        )
        assert planned["status"] == "WAITING_APPROVAL"
        await call(
            client, "approve_saga_step", {"saga_id": sid, "node_id": planned["id"], "approved": True, "reason": "ci"}
        )
        # when a run asks for more parallelism than the budget allows, it is refused in the seed's words
        denied = await client.call_tool("run_ready_steps", {"saga_id": sid, "max_parallel": 2})
        assert denied.is_error
        # and a run within the budget goes ahead
        await call(client, "run_ready_steps", {"saga_id": sid, "max_parallel": 1})
        decisions = await call(client, "get_policy_decisions", {"saga_id": sid})
        return sid, denied.content[0].text, decisions

    sid, denied, decisions = run_as(server, ALICE, operator)
    assert "parallelism budget" in denied
    # then the decisions are under `events`, each POLICY_DECISION carrying the policy revision
    revisions = {e["data"].get("revision") for e in decisions["events"] if e["event_type"] == "POLICY_DECISION"}
    assert revisions == {REVISION}
    assert decisions["decisions"] == [e for e in decisions["events"] if e["event_type"] == "POLICY_DECISION"]

    async def viewer(client: Client) -> tuple[dict[str, Any], dict[str, Any]]:
        return await call(client, "get_policy_status", {}), await call(client, "get_policy_decisions", {"saga_id": sid})

    status, same = run_as(server, VERA, viewer)
    assert status["enabled"] is True and status["revision"] == REVISION and status["backend"] == "json"
    assert same["events"] == decisions["events"]

    async def outsider(client: Client) -> Any:
        return await client.call_tool("get_policy_decisions", {"saga_id": sid})

    hidden = run_as(server, MALLORY, outsider)
    assert hidden.is_error and "Saga not found" in hidden.content[0].text


def test_a_planned_node_over_the_node_budget_is_refused_in_the_seeds_words(server: AnswersServer):
    async def operator(client: Client) -> str:
        sid = (await call(client, "begin_saga", {}))["id"]
        for number in range(10):
            await call(
                client,
                "plan_saga_step",
                {"saga_id": sid, "action": "create_text_file", "input": {"path": f"{number}.txt", "content": "x"}},
            )
        eleventh = await client.call_tool(
            "plan_saga_step",
            {"saga_id": sid, "action": "create_text_file", "input": {"path": "10.txt", "content": "x"}},
        )
        assert eleventh.is_error
        return eleventh.content[0].text

    assert "planned-node budget exceeded: requested 11, limit 10" in run_as(server, ALICE, operator)
