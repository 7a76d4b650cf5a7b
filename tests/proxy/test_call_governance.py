"""Governance of proxied calls, exactly as of registered actions: the kill switch and tenant policy refuse with
nothing forwarded (a changed tool definition is a fact policy can refuse on); classes are recorded with their
source, traps included; a preview session forwards reads and records everything else DRY, leaving the world as it
was, and the preview report shows it."""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from django.db import connections

from governance.identity.principal import Principal, local_principal
from governance.kill_switch import kill_switch_engage
from sagas import coordinator
from sagas.models import Saga, Step
from sagas.protocols.proxy.runtime import journaled
from sagas.selectors import preview_report
from tests.proxy.agent import connect, text
from tests.proxy.facts import answered, call_facts, session_facts
from tests.proxy.harness import TINY, HttpDownstream, config_file, serve_proxy, stdio

pytestmark = pytest.mark.django_db(transaction=True)
ADMIN = local_principal(protocol="test", tenant_id="acme")
EMAIL = {"to": "a@example.com", "subject": "hello", "body": "hi"}


@pytest.fixture
def use_policy(tmp_path: Path, settings: Any) -> Any:
    def apply(rules: list[dict[str, Any]], **section: Any) -> None:
        document = {
            "schema_version": 1,
            "revision": "proxy-test",
            "default_effect": "allow",
            "tenants": {"acme": {"rules": rules, **section}},
        }
        path = tmp_path / "policy.json"
        path.write_text(json.dumps(document))
        settings.SAGA_POLICY_MODE = "json"
        settings.SAGA_POLICY_FILE = str(path)

    return apply


def _world(demo_http: HttpDownstream) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{demo_http.port}/world") as answer:
        return dict(json.loads(answer.read()))


def _engage_kill_switch() -> None:
    try:
        kill_switch_engage(actor=ADMIN, reason="incident 42")
    finally:
        connections.close_all()  # a worker thread's connection would keep the test database from being dropped


def _step(action: str) -> Step:
    return Step.objects.get(action=action)


def test_the_kill_switch_refuses_a_call_with_nothing_forwarded(tmp_path: Path, demo_http: HttpDownstream):
    with serve_proxy(config_file(tmp_path, {"demo": {"url": demo_http.url}}), call_path=journaled) as served:

        async def scenario() -> tuple[Any, dict[str, Any], dict[str, Any]]:
            async with connect(served.url, "legacy") as client:
                await client.call_tool("list_contacts", {})  # the session is open
                await anyio.to_thread.run_sync(_engage_kill_switch)
                before = await anyio.to_thread.run_sync(_world, demo_http)
                refused = await client.call_tool("send_email", EMAIL)
                return refused, before, await anyio.to_thread.run_sync(_world, demo_http)

        refused, before, after = anyio.run(scenario)

    assert refused.is_error and "kill switch" in text(refused) and before == after
    step = _step("proxy.demo.send_email")
    assert step.status == "REFUSED" and step.error["code"] == "KILL_SWITCH_ENGAGED"


def test_a_policy_deny_refuses_a_call_with_nothing_forwarded(tmp_path: Path, demo_http: HttpDownstream, use_policy):
    use_policy([{"id": "no-mail", "effect": "deny", "match": {"actions": ["proxy.demo.send_email"]}}])
    with serve_proxy(config_file(tmp_path, {"demo": {"url": demo_http.url}}), call_path=journaled) as served:

        async def scenario() -> tuple[Any, dict[str, Any], dict[str, Any]]:
            async with connect(served.url, "legacy") as client:
                before = await anyio.to_thread.run_sync(_world, demo_http)
                refused = await client.call_tool("send_email", EMAIL)
                return refused, before, await anyio.to_thread.run_sync(_world, demo_http)

        refused, before, after = anyio.run(scenario)

    assert refused.is_error and "no-mail" in text(refused) and before == after
    assert refused.meta["io.semantic-saga/proxy"]["policy"]["rules"] == ["no-mail"]
    assert _step("proxy.demo.send_email").error["code"] == "POLICY_DENIED"


def test_policy_can_refuse_a_tool_whose_definition_changed_since_the_session_began(use_policy):
    use_policy([{"id": "rug-pull", "effect": "deny", "match": {"definition_changed": True}}])
    session = coordinator.proxy_session_open(actor=ADMIN, session=session_facts())
    call = call_facts("list_contacts", class_source="annotation")
    same = coordinator.proxy_call_begin(actor=ADMIN, saga_id=session.id, call=call, arguments={})
    coordinator.proxy_call_finish(actor=ADMIN, saga_id=session.id, step_id=same.step_id, fence=1, outcome=answered())
    changed = call.model_copy(update={"pinned_definition_hash": "a" * 64, "definition_changed": True})
    refused = coordinator.proxy_call_begin(actor=ADMIN, saga_id=session.id, call=changed, arguments={})
    assert same.outcome == "forward" and refused.outcome == "refused" and refused.code == "POLICY_DENIED"
    assert Step.objects.get(pk=refused.step_id).action_definition["proxy"]["definition_changed"] is True


def test_classes_are_recorded_with_their_source_including_the_traps(tmp_path: Path):
    servers = {"tiny": stdio(TINY, "--journal-tools")}
    config = config_file(
        tmp_path,
        servers,
        rules=[{"tool": "send_email", "class": "C", "reason": "mail is C"}],
        policy={"confirmTimeoutMs": 500},
    )
    with serve_proxy(config, call_path=journaled) as served:

        async def scenario() -> dict[str, Any]:
            async with connect(served.url, "legacy") as client:
                return {
                    "wipe_cache": await client.call_tool("wipe_cache", {}),
                    "transfer_funds": await client.call_tool("transfer_funds", {"amount": 5}),
                    "send_email": await client.call_tool("send_email", {"to": "a", "subject": "b"}),
                }

        answers = anyio.run(scenario)

    def recorded(tool: str) -> tuple[str, str, str]:
        proxy = Step.objects.get(action=f"proxy.tiny.{tool}").action_definition["proxy"]
        return proxy["class"], proxy["class_source"], proxy["gate"]

    # a mutating tool that claims readOnlyHint is not taken at its word: I by its name, held, denied at the timeout
    assert recorded("wipe_cache")[:1] == ("I",) and recorded("wipe_cache")[2] == "confirm"
    assert answers["wipe_cache"].is_error
    # an unannotated transfer_funds is I by its name, held, and denied when nobody confirms it
    assert recorded("transfer_funds") == ("I", "heuristic", "confirm") and answers["transfer_funds"].is_error
    assert _step("proxy.tiny.transfer_funds").status == "REFUSED"
    assert recorded("send_email") == ("C", "rule", "allow")
    snapshot = _step("proxy.tiny.send_email").action_definition
    assert snapshot["semantic"]["reversibility"] == "irreversible" and snapshot["kind"] == "mcp"


def test_preview_forwards_reads_records_the_rest_dry_and_leaves_the_world_unchanged(
    tmp_path: Path, demo_http: HttpDownstream, operator: Principal
):
    config = config_file(tmp_path, {"demo": {"url": demo_http.url}}, preview=True)
    with serve_proxy(config, call_path=journaled) as served:

        async def scenario() -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
            async with connect(served.url, "legacy") as client:
                read = await client.call_tool("list_contacts", {})
                before = await anyio.to_thread.run_sync(_world, demo_http)
                answers = [
                    read,
                    await client.call_tool("create_contact", {"name": "Dry", "email": "dry@example.com"}),
                    await client.call_tool("send_email", EMAIL),
                    await client.call_tool(
                        "transfer_funds", {"from_account": "acc-payroll", "to_account": "acc-vendor", "amount": 9}
                    ),
                ]
                return answers, before, await anyio.to_thread.run_sync(_world, demo_http)

        answers, before, after = anyio.run(scenario)

    assert before == after  # nothing reached the world, its call log included
    assert not answers[0].is_error and "contacts" in answers[0].structured_content
    assert all("recorded, NOT executed" in text(answer) for answer in answers[1:])
    session = Saga.objects.get(metadata__has_key="proxy")
    assert session.preview
    statuses = {step.action: step.status for step in Step.objects.filter(saga=session)}
    assert statuses == {
        "proxy.demo.list_contacts": "COMPLETED",
        "proxy.demo.create_contact": "DRY",
        "proxy.demo.send_email": "DRY",
        "proxy.demo.transfer_funds": "DRY",
    }
    report = preview_report(actor=operator, saga_id=session.id)
    transfer = next(item for item in report["items"] if item["action"] == "proxy.demo.transfer_funds")
    assert transfer["outside_preview"] == "would wait for approval" and transfer["class"] == "irreversible"
    assert transfer["proxy"] == {"class": "I", "class_source": "heuristic", "would_gate": "confirm"}
    assert report["reads_executed"] == 1
    assert report["summary"].startswith("Nothing reached the world. 1 read(s) executed, 3 call(s) recorded dry")


def test_a_result_is_journaled_scrubbed_of_secrets_and_truncated_with_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("PROXY_TEST_TOKEN", "s3cr3t-value-123")
    tiny = stdio(TINY, "--journal-tools", env={"TOKEN": {"secret_ref": "env://PROXY_TEST_TOKEN"}})
    config = config_file(tmp_path, {"tiny": tiny}, ledger={"maxResultBytes": 100})
    with serve_proxy(config, call_path=journaled) as served:

        async def scenario() -> Any:
            async with connect(served.url, "legacy") as client:
                return await client.call_tool("echo_env", {"name": "TOKEN"})

        answer = anyio.run(scenario)

    assert "s3cr3t-value-123" in text(answer)  # the agent gets exactly what the downstream said
    step = _step("proxy.tiny.echo_env")
    assert step.status == "COMPLETED" and "s3cr3t-value-123" not in json.dumps(step.result)
    assert step.result["truncated"] is True and step.result["size_bytes"] > 400
    assert len(step.result["result"]["prefix"].encode()) <= 100 and "[REDACTED]" in step.result["result"]["prefix"]


def test_a_tenant_budget_refuses_a_proxied_call_as_it_does_a_registered_action(use_policy):
    use_policy([], budgets={"max_steps_per_saga": 1})
    session = coordinator.proxy_session_open(actor=ADMIN, session=session_facts())
    call = call_facts("list_contacts")
    first = coordinator.proxy_call_begin(actor=ADMIN, saga_id=session.id, call=call, arguments={})
    second = coordinator.proxy_call_begin(actor=ADMIN, saga_id=session.id, call=call, arguments={})
    assert first.outcome == "forward"
    coordinator.proxy_call_finish(actor=ADMIN, saga_id=session.id, step_id=first.step_id, fence=1, outcome=answered())
    assert second.outcome == "refused" and second.code == "POLICY_DENIED" and "max_steps_per_saga" in second.reason


def test_a_read_sent_before_a_kill_switch_is_journaled_as_it_happened_and_the_next_call_is_refused():
    # given a read the proxy checked and sent with the step id it chose (journaled behind its answer)
    session = coordinator.proxy_session_open(actor=ADMIN, session=session_facts())
    sent_id = uuid.uuid4()
    # when a kill switch is engaged before its journal line is written
    kill_switch_engage(actor=ADMIN, reason="incident 43")
    behind = coordinator.proxy_call_begin(
        actor=ADMIN, saga_id=session.id, call=call_facts("list_items"), arguments={}, step_id=sent_id
    )
    ahead = coordinator.proxy_call_begin(actor=ADMIN, saga_id=session.id, call=call_facts("list_items"), arguments={})
    # then the sent read's step says it went out, under the id it carried; a call after the switch is refused
    assert (behind.outcome, behind.step_id) == ("forward", str(sent_id))
    assert (ahead.outcome, ahead.code) == ("refused", "KILL_SWITCH_ENGAGED")
