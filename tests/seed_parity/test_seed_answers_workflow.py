"""The workflow a semantic-saga-mcp client runs (its README and docs/workflow_engine.md: begin, plan with
depends_on, approve gated nodes, run ready steps, commit when every node completed; its file-transaction demo)
against our MCP server, reading the fields under the names that client reads."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client

from registry.defaults import register_defaults
from tests.protocols.conftest import ALICE
from tests.protocols.mcp_client import call, connect
from tests.seed_parity.answers_server import AnswersServer, answers_server

SHA256_HEX = 64


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    """The server is another process: rows must be committed; create_text_file is there as at every start."""
    register_defaults()


@pytest.fixture(scope="module")
def server(
    django_db_setup: None, django_db_blocker: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AnswersServer]:
    with answers_server(tmp_path_factory.mktemp("answers")) as running:
        yield running


async def _error_text(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return result.content[0].text


def _run(server: AnswersServer, scenario: Any) -> Any:
    async def session() -> Any:
        async with connect(server.mcp_url, ALICE, "auto") as client:
            return await scenario(client)

    return asyncio.run(session())


def test_a_gated_node_is_approvable_only_after_its_dependencies_and_the_saga_commits_only_then(
    server: AnswersServer,
):
    async def scenario(client: Client) -> dict[str, Any]:
        # given a saga with node A and a gated node B that depends on A
        sid = (await call(client, "begin_saga", {"metadata": {"case": "dag"}}))["id"]
        a = await call(client, "plan_saga_step", {"saga_id": sid, "action": "create_text_file", "input": _file("a")})
        b = await call(
            client,
            "plan_saga_step",
            {
                "saga_id": sid,
                "action": "create_text_file",
                "input": _file("b"),
                "depends_on": [a["id"]],
                "approval_required": True,
            },
        )
        assert b["status"] == "WAITING_DEPENDENCY"
        # when B is approved before A completed, the approval is refused as the seed refuses it
        early = await _error_text(client, "approve_saga_step", {"saga_id": sid, "node_id": b["id"]})
        assert "approval is not pending" in early
        # and running the ready work completes A only: B now waits for its approver, so commit is refused
        ran = await call(client, "run_ready_steps", {"saga_id": sid})
        statuses = {n["id"]: n["status"] for n in ran["workflow"]["nodes"]}
        assert statuses == {a["id"]: "COMPLETED", b["id"]: "WAITING_APPROVAL"}
        refused_commit = await client.call_tool("commit_saga", {"saga_id": sid})
        assert refused_commit.is_error
        # then approving B now, running and committing succeeds
        await call(client, "approve_saga_step", {"saga_id": sid, "node_id": b["id"], "reason": "checked"})
        await call(client, "run_ready_steps", {"saga_id": sid})
        return await call(client, "commit_saga", {"saga_id": sid})

    committed = _run(server, scenario)
    assert committed["status"] == "COMMITTED"
    assert (server.files / "a.txt").exists() and (server.files / "b.txt").exists()


def test_the_file_transaction_demo_rolls_back_on_a_simulated_error(server: AnswersServer):
    async def scenario(client: Client) -> tuple[str, dict[str, Any]]:
        # given three files created in one saga
        sid = (await call(client, "begin_saga", {"metadata": {"demo": "file transaction"}}))["id"]
        for number in (1, 2, 3):
            await call(
                client,
                "execute_saga_step",
                {"saga_id": sid, "action": "create_text_file", "input": _file(f"demo-{number}")},
            )
        # when the fourth step asks for a simulated error
        failed = await _error_text(
            client,
            "execute_saga_step",
            {
                "saga_id": sid,
                "action": "create_text_file",
                "input": {**_file("demo-4"), "simulate_error": True},
            },
        )
        return failed, await call(client, "get_saga", {"saga_id": sid})

    failed, saga = _run(server, scenario)
    # then the step failed with the seed's words and the saga rolled back, removing the three files
    assert "simulated file transaction failure" in failed
    assert saga["status"] == "ROLLED_BACK"
    assert not any((server.files / f"demo-{n}.txt").exists() for n in (1, 2, 3, 4))


def test_a_saga_carries_the_seeds_ownership_and_identity_fields(server: AnswersServer):
    async def scenario(client: Client) -> dict[str, Any]:
        sid = (await call(client, "begin_saga", {"metadata": {"case": "identity"}}))["id"]
        await call(client, "plan_saga_step", {"saga_id": sid, "action": "create_text_file", "input": _file("id")})
        return await call(client, "get_saga", {"saga_id": sid})

    saga = _run(server, scenario)
    # session_id: the owning scope (the tenant, hashed, as the seed gives it); workflow.version: 1
    assert saga["session_id"].startswith("tenant:") and len(saga["session_id"]) == len("tenant:") + SHA256_HEX
    assert saga["workflow"]["version"] == 1
    identity = saga["metadata"]["_identity"]
    assert identity["identity_source"] == "oauth-access-token"
    assert identity["roles"] == ["operator"]
    assert identity["principal_id"] == "alice" and identity["tenant_id"] == "acme"


def test_the_timeline_and_audit_reads_answer_under_the_seeds_names(server: AnswersServer):
    async def scenario(client: Client) -> tuple[dict[str, Any], ...]:
        sid = (await call(client, "begin_saga", {}))["id"]
        await call(
            client,
            "plan_saga_step",
            {"saga_id": sid, "action": "create_text_file", "input": _file("t"), "approval_required": True},
        )
        timeline = await call(client, "get_saga_timeline", {"saga_id": sid})
        verified = await call(
            client, "verify_audit_chain", {"saga_id": sid, "limit": 1, "event_types": ["SAGA_STARTED"]}
        )
        events = await call(client, "get_audit_events", {"saga_id": sid})
        return timeline, verified, events

    timeline, verified, events = _run(server, scenario)
    # the seed's fields
    assert timeline["saga_id"] == timeline["saga"]["id"]
    assert timeline["status"] == "ACTIVE"
    assert timeline["created_at"] and timeline["updated_at"]
    [node] = timeline["workflow_nodes"]
    assert node["status"] == "WAITING_APPROVAL" and node["approval_status"] == "PENDING"
    assert [e["event_type"] for e in timeline["audit"]][:2] == ["SAGA_STARTED", "NODE_PLANNED"]
    assert all(e["saga_id"] == timeline["saga_id"] for e in timeline["audit"])
    assert timeline["audit_integrity"]["valid"] is True
    # ours beside them, with the same facts
    assert timeline["events"] == timeline["audit"] and timeline["integrity"] == timeline["audit_integrity"]
    assert [n["id"] for n in timeline["nodes"]] == [node["id"]]
    # verify_audit_chain takes the seed's limit and event_types and still checks the whole chain
    assert verified["valid"] is True and verified["events_checked"] == len(events["events"])
    assert all(e["saga_id"] == verified["saga_id"] for e in events["events"])


def test_get_action_names_the_builtin_the_seeds_way(server: AnswersServer):
    async def scenario(client: Client) -> tuple[dict[str, Any], dict[str, Any]]:
        return (
            await call(client, "get_action", {"action": "create_text_file"}),
            await call(client, "list_actions", {}),
        )

    action, listed = _run(server, scenario)
    assert action["id"] == "create_text_file" and action["version"] == "1.0.0"
    assert action["kind"] == "runtime" and action["contract_kind"] == "builtin"
    assert action["implementation"] == "registry.actions.builtin.create_text_file"
    assert len(action["implementation_hash"]) == SHA256_HEX
    assert "simulate_error" in action["input_schema"]["properties"]
    assert {a["id"]: a["kind"] for a in listed["actions"]}["create_text_file"] == "runtime"


def test_policy_status_without_a_policy_says_disabled(server: AnswersServer):
    async def scenario(client: Client) -> dict[str, Any]:
        return await call(client, "get_policy_status", {})

    status = _run(server, scenario)
    assert status["enabled"] is False and status["revision"] == "disabled" and status["backend"] == "none"


def _file(name: str) -> dict[str, str]:
    return {"path": f"{name}.txt", "content": f"{name}\n"}
