"""Who may decide a held call: never the principal that made it. Over HTTP an operator whose token made the call is
refused by REST (approve and reject) and by /mcp's approve_saga_step, naming who may decide instead, and another
operator's approval sends it; an agent-role token may call but decide nothing. Over stdio the local agent's call
is decided only by a person at a terminal: `semantic-saga approve` run without one is refused, and nothing runs."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from governance.errors import ServiceError
from governance.identity.authentication import anonymous_principal
from governance.identity.principal import local_agent, local_principal
from sagas import coordinator
from sagas.models import Node
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from tests.conftest import make_principal
from tests.distributed.workers import shared_database_url
from tests.proxy.agent import text
from tests.proxy.facts import call_facts, session_facts
from tests.proxy.guardian import ALICE, AVA, OLGA, Guarded, guarded_proxy, held_node, stateless_call
from tests.proxy.terminal import ROOT, at_terminal

pytestmark = pytest.mark.django_db(transaction=True)


def _purge_while(guarded: Guarded, token: str, decide: Any) -> Any:
    """The agent (`token`) calls purge_cache (class I: held) while `decide(node)` runs in a thread; its answer."""

    async def scenario() -> Any:
        async with guarded.agent(token) as client, anyio.create_task_group() as group:
            answer: dict[str, Any] = {}

            async def call() -> None:
                answer["result"] = await client.call_tool("purge_cache", {"scope": "all"})

            group.start_soon(call)
            node = await anyio.to_thread.run_sync(held_node)
            await anyio.to_thread.run_sync(decide, node)
        return answer["result"]

    return anyio.run(scenario)


def test_over_http_the_caller_may_not_decide_its_own_held_call_and_another_operator_may(tmp_path: Path):
    seen: dict[str, Any] = {}

    def decide(node: Node) -> None:
        path = f"/api/v1/sagas/{node.saga_id}/nodes/{node.id}"
        with guarded.http(ALICE) as alice, guarded.http(OLGA) as olga:
            seen["queue"] = alice.get("/api/v1/approvals/").json()["approvals"]
            seen["approve"] = alice.post(f"{path}/approve/", json={})
            seen["reject"] = alice.post(f"{path}/reject/", json={"reason": "my own"})
            held = {"saga_id": str(node.saga_id), "node_id": str(node.id)}
            seen["tool"] = stateless_call(f"{guarded.base}/mcp", ALICE, "approve_saga_step", held)
            seen["olga"] = olga.post(f"{path}/approve/", json={})

    with guarded_proxy("http", tmp_path) as guarded:
        answer = _purge_while(guarded, ALICE, decide)

    assert [item["id"] for item in seen["queue"]] == [str(Node.objects.get().id)]  # she sees it waiting
    for refusal in (seen["approve"], seen["reject"]):
        error = refusal.json()["error"]
        assert refusal.status_code == 403 and error["code"] == "SEPARATION_OF_DUTIES"
        assert "may not decide it" in error["message"] and "Another person of tenant acme" in error["message"]
    # through /mcp (a surface agents drive) not even another role would do
    assert seen["tool"]["isError"] and "DECIDED_BY_A_PERSON" in seen["tool"]["content"][0]["text"]
    assert seen["olga"].status_code == 200
    assert not answer.is_error and "purge_cache" in text(answer)
    assert [call["tool"] for call in guarded.calls()] == ["purge_cache"]
    assert Node.objects.get().approvals.get().decided_by == "olga"


def test_an_agent_role_may_call_but_never_decide(tmp_path: Path):
    seen: dict[str, Any] = {}

    def decide(node: Node) -> None:
        with guarded.http(AVA) as ava, guarded.http(OLGA) as olga:
            seen["ava"] = ava.post(f"/api/v1/sagas/{node.saga_id}/nodes/{node.id}/approve/", json={})
            olga.post(f"/api/v1/sagas/{node.saga_id}/nodes/{node.id}/reject/", json={"reason": "not today"})

    with guarded_proxy("http", tmp_path) as guarded:
        answer = _purge_while(guarded, AVA, decide)

    error = seen["ava"].json()["error"]
    assert seen["ava"].status_code == 403 and error["code"] == "FORBIDDEN" and "'decide' capability" in error["message"]
    assert answer.is_error and "olga denied it" in text(answer) and guarded.calls() == []


def test_over_stdio_only_a_person_at_a_terminal_decides(tmp_path: Path):
    seen: dict[str, Any] = {}

    def decide(node: Node) -> None:
        seen["ledger"], seen["status"] = at_terminal("ledger", answer=""), at_terminal("status", answer="")
        seen["piped"] = _piped("approve", str(node.id))
        seen["as_agent"] = at_terminal("approve", str(node.id), "--by", "local-agent")
        seen["typed_no"] = at_terminal("approve", str(node.id), answer="no")
        seen["person"] = at_terminal("approve", str(node.id), "--by", "olga")

    with guarded_proxy("stdio", tmp_path) as guarded:
        answer = _purge_while(guarded, ALICE, decide)

    # a session whose only call is held counts it, in the ledger and the status
    held_line = next(line for line in seen["ledger"].stdout.splitlines() if "purge_cache" in line)
    assert " I " in held_line and " held " in held_line and "1 call(s)" in seen["ledger"].stdout
    assert "1 held" in seen["status"].stdout and "1 call(s) held for approval" in seen["status"].stdout
    assert seen["piped"].returncode != 0 and "only at an interactive terminal" in seen["piped"].stderr
    assert (
        "SEPARATION_OF_DUTIES" in seen["as_agent"].stdout
        and "local-agent made the held call" in seen["as_agent"].stdout
    )
    assert seen["typed_no"].returncode != 0 and "Nothing was decided" in seen["typed_no"].stdout
    assert seen["person"].returncode == 0, seen["person"].stdout
    assert "Type yes to approve it" in seen["person"].stdout and "(class I)" in seen["person"].stdout
    assert not answer.is_error and [call["tool"] for call in guarded.calls()] == ["purge_cache"]
    assert Node.objects.get().approvals.get().decided_by == "olga"


def _piped(*args: str) -> Any:
    env = {**os.environ, "DATABASE_URL": shared_database_url(), "SAGA_DEFAULT_TENANT": "acme", "NO_COLOR": "1"}
    command = [str(Path(sys.executable).parent / "semantic-saga"), *args]
    return subprocess.run(command, env=env, cwd=ROOT, input="yes\n", capture_output=True, text=True, timeout=60)


def _held_in_process() -> Node:
    """A call the proxy holds, made by the local agent (as `semantic-saga proxy` makes it)."""
    agent = local_agent("mcp-proxy-stdio", "acme")
    session = coordinator.proxy_session_open(actor=agent, session=session_facts())
    call = call_facts("purge_cache", effect_class="I", gate="confirm")
    begun = coordinator.proxy_call_begin(actor=agent, saga_id=session.id, call=call, arguments={"scope": "all"})
    return Node.objects.get(pk=begun.node_id)


def test_no_agent_surface_and_no_unauthenticated_caller_decides_a_held_call():
    node = _held_in_process()
    arguments = {"saga_id": str(node.saga_id), "node_id": str(node.id)}
    # the local operator of `semantic-saga mcp`, an operator token over /mcp or A2A, and SAGA_AUTH_MODE=none's anonymous
    # admin: each is refused, whatever its role
    for decider in (
        local_principal(protocol="stdio", tenant_id="acme"),
        replace(make_principal("olga", "acme", "operator"), protocol="mcp"),
        replace(make_principal("olga", "acme", "operator"), protocol="a2a"),
        replace(anonymous_principal("rest"), tenant_id="acme"),
    ):
        with pytest.raises(ServiceError) as refused:
            invoke(OPERATIONS["approve_saga_step"], decider, arguments)
        assert refused.value.code == "DECIDED_BY_A_PERSON"
        assert "a surface agents drive" in refused.value.message or "without signing in" in refused.value.message
    assert Node.objects.get(pk=node.id).status == "WAITING_APPROVAL"
    invoke(OPERATIONS["approve_saga_step"], make_principal("olga", "acme", "operator"), arguments)
    assert Node.objects.get(pk=node.id).status == "READY"


def test_committing_a_proxy_session_is_a_persons_decision_not_the_agents():
    node = _held_in_process()
    coordinator.proxy_call_withdraw(
        actor=local_agent("mcp-proxy-stdio", "acme"),
        saga_id=node.saga_id,
        node_id=node.id,
        why="cancelled",
        call=call_facts("purge_cache", effect_class="I", gate="confirm"),
        arguments={"scope": "all"},
    )
    for committer in (
        make_principal("ava", "acme", "agent"),
        replace(make_principal("olga", "acme", "operator"), protocol="mcp"),
    ):
        with pytest.raises(ServiceError):
            invoke(OPERATIONS["commit_saga"], committer, {"saga_id": str(node.saga_id)})
    assert (
        invoke(OPERATIONS["commit_saga"], make_principal("olga", "acme", "operator"), {"saga_id": str(node.saga_id)})[
            "status"
        ]
        == "COMMITTED"
    )


def test_the_approver_sees_every_argument_and_what_changed_in_the_definition():
    agent = local_agent("mcp-proxy-stdio", "acme")
    session = coordinator.proxy_session_open(actor=agent, session=session_facts())
    changes = ('annotations: added ({"readOnlyHint": true})',)
    call = call_facts(
        "send_email", effect_class="C", gate="confirm", definition_changed=True, definition_changes=changes
    )
    arguments = {"body": "x" * 3000, "subject": "Hi", "to": "attacker@evil.example"}
    begun = coordinator.proxy_call_begin(actor=agent, saga_id=session.id, call=call, arguments=arguments)
    shown = at_terminal("approve", begun.node_id, "--by", "olga", answer="no")
    # a long body does not push the recipient out of sight, and the clipping is said
    assert 'to: "attacker@evil.example"' in shown.stdout and "[2502 more characters]" in shown.stdout
    assert "NOT the one this deployment pinned" in shown.stdout and "annotations: added" in shown.stdout
    assert shown.returncode != 0 and Node.objects.get(pk=begun.node_id).status == "WAITING_APPROVAL"
    pending = at_terminal("pending", answer="")
    assert "send_email (definition changed)" in pending.stdout


def test_a_call_whose_rule_asks_only_the_client_is_not_decided_by_operators():
    agent = local_agent("mcp-proxy-stdio", "acme")
    session = coordinator.proxy_session_open(actor=agent, session=session_facts())
    call = call_facts("purge_cache", effect_class="I", gate="confirm", approvers="client")
    begun = coordinator.proxy_call_begin(actor=agent, saga_id=session.id, call=call, arguments={})
    arguments = {"saga_id": str(session.id), "node_id": begun.node_id}
    with pytest.raises(ServiceError) as refused:
        invoke(OPERATIONS["approve_saga_step"], make_principal("olga", "acme", "operator"), arguments)
    assert refused.value.code == "DECIDED_AT_CLIENT"
    # the person at the client decides it (what the proxy records from the elicitation's answer)
    coordinator.proxy_call_client_decide(actor=agent, saga_id=session.id, node_id=begun.node_id, approved=True)
    approval = Node.objects.get(pk=begun.node_id).approvals.get()
    assert approval.status == "APPROVED" and approval.decided_by == "client:local-agent"
