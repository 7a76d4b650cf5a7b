"""Preview sagas: plan, execute and run do everything but the side effect; the report says what would happen;
a promoted preview runs for real with every check made again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from audit.chain import verify_chain
from audit.models import AuditEvent
from governance.identity.principal import Principal
from sagas import coordinator
from sagas.errors import SagaError
from sagas.models import Node, Saga, Step
from sagas.selectors import preview_report
from sagas.states import NodeStatus, SagaStatus, StepStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer


def _contracts(url: str) -> None:
    reserve = http_contract("reserve", url, compensation_path="/release", reversibility="reversible")
    reserve["semantic"]["risk"] = "medium"
    email = http_contract("email", url, reversibility="compensable", compensation_path="/email-correction")
    transfer = http_contract("transfer", url, reversibility="irreversible", approval_required=True)
    transfer["semantic"]["risk"] = "high"
    transfer["forward"]["headers"] = {"Authorization": {"secret_ref": "env://BANK_TOKEN", "prefix": "Bearer "}}
    for contract in (reserve, email, transfer):
        register(contract)


def _plan_order(actor: Principal, saga_id: object) -> None:
    coordinator.node_plan(actor=actor, saga_id=saga_id, action="reserve", input={"sku": "X"}, key="reserve")
    coordinator.node_plan(
        actor=actor, saga_id=saga_id, action="email", input={"to": "a@b.c"}, key="email", depends_on=["reserve"]
    )
    coordinator.node_plan(
        actor=actor, saga_id=saga_id, action="transfer", input={"amount": 500}, key="transfer", depends_on=["email"]
    )


def test_a_preview_run_touches_nothing_and_records_dry_steps_in_the_chain(
    operator: Principal, downstream: RecordingHTTPServer
) -> None:
    _contracts(downstream.url)
    saga = coordinator.saga_begin(actor=operator, preview=True)
    _plan_order(operator, saga.id)
    # when the whole saga is run
    report = coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=0)
    # then nothing reached the world, every node and step is DRY, and the chain verifies with the dry steps in it
    assert downstream.requests == []
    assert report.count(NodeStatus.DRY) == 3
    assert set(Step.objects.filter(saga=saga).values_list("status", flat=True)) == {StepStatus.DRY}
    assert verify_chain(saga.id).valid
    dry = AuditEvent.objects.filter(saga_id=saga.id, event_type="STEP_DRY").order_by("sequence")
    assert [e.action for e in dry] == ["reserve", "email", "transfer"]
    assert dry.last().data["outside_preview"] == "would wait for approval"  # type: ignore[union-attr]
    assert Saga.objects.get(pk=saga.id).status == SagaStatus.ACTIVE


def test_the_report_groups_by_reversibility_and_names_gates_budget_and_compensations(
    operator: Principal, downstream: RecordingHTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BANK_TOKEN", "s3cret-never-shown")
    _contracts(downstream.url)
    saga = coordinator.saga_begin(actor=operator, preview=True)
    _plan_order(operator, saga.id)
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=0)
    report = preview_report(actor=operator, saga_id=saga.id)
    classes = {group["class"]: group for group in report["classes"]}
    assert classes["irreversible"]["actions"] == ["transfer"]
    assert classes["reversible"]["actions"] == ["reserve"] and classes["compensable"]["actions"] == ["email"]
    assert [item["action"] for item in report["would_wait_for_approval"]] == ["transfer"]
    assert report["budget_impact"]["risk_units"] > 3 and report["budget_impact"]["steps"] == 3
    # the rollback that would run: newest first, and the transfer has nothing to undo it
    plan = [(entry["action"], "none declared" in entry["compensation"]) for entry in report["compensation_plan"]]
    assert plan == [("transfer", True), ("email", False), ("reserve", False)]
    # the request is resolved for the reader, with the secret reference named but never its value
    transfer = next(item for item in report["items"] if item["action"] == "transfer")
    assert transfer["request"]["forward"]["body"]["input"] == {"amount": 500}
    rendered = json.dumps(report)
    assert "s3cret-never-shown" not in rendered and "redacted secret env://BANK_TOKEN" in rendered
    assert report["audit"]["valid"] and report["summary"].startswith("Nothing reached the world. 3 step(s)")


def test_an_immediate_step_in_a_preview_is_journaled_dry_and_not_called(
    operator: Principal, downstream: RecordingHTTPServer
) -> None:
    _contracts(downstream.url)
    saga = coordinator.saga_begin(actor=operator, preview=True)
    step = coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="reserve", input={"sku": "Y"})
    assert step.status == StepStatus.DRY and step.result["dry_run"] is True and "NOT executed" in step.result["note"]
    assert downstream.requests == []


def test_a_preview_never_commits_and_rolls_back_without_compensating(
    operator: Principal, downstream: RecordingHTTPServer
) -> None:
    _contracts(downstream.url)
    saga = coordinator.saga_begin(actor=operator, preview=True)
    _plan_order(operator, saga.id)
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=0)
    with pytest.raises(SagaError) as refused:
        coordinator.saga_commit(actor=operator, saga_id=saga.id)
    assert refused.value.code == "PREVIEW_SAGA" and "promote" in refused.value.message
    assert coordinator.saga_rollback(actor=operator, saga_id=saga.id).status == SagaStatus.ROLLED_BACK
    assert downstream.requests == []


def test_promoting_a_preview_plans_it_again_with_fresh_checks_and_runs_for_real(
    operator: Principal, approver: Principal, downstream: RecordingHTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BANK_TOKEN", "t0ken")
    _contracts(downstream.url)
    preview = coordinator.saga_begin(actor=operator, metadata={"order": "42"}, preview=True)
    _plan_order(operator, preview.id)
    coordinator.saga_run_ready(actor=operator, saga_id=preview.id, wait_seconds=0)
    # when promoted
    real = coordinator.saga_promote(actor=operator, saga_id=preview.id)
    # then a new, real saga has the same nodes planned afresh: the transfer asks for a new approval, put to the
    # approver once its dependencies completed
    assert not real.preview and real.metadata["promoted_from"] == str(preview.id) and real.metadata["order"] == "42"
    nodes = {n.key: n for n in Node.objects.filter(saga=real)}
    assert nodes["transfer"].status == NodeStatus.WAITING_DEPENDENCY and nodes["reserve"].status == NodeStatus.READY
    assert nodes["transfer"].approvals.get().status == "PENDING"
    assert preview_report(actor=operator, saga_id=preview.id)["promoted_to"] == [str(real.id)]
    # and it runs for real once approved
    coordinator.saga_run_ready(actor=operator, saga_id=real.id, wait_seconds=30)
    coordinator.node_approve(actor=approver, saga_id=real.id, node_id="transfer")
    coordinator.saga_run_ready(actor=operator, saga_id=real.id, wait_seconds=30)
    assert [r.path for r in downstream.requests] == ["/reserve", "/email", "/transfer"]
    assert coordinator.saga_commit(actor=operator, saga_id=real.id).status == SagaStatus.COMMITTED


RULE = {"actions": ["transfer"]}


def test_policy_is_recorded_in_a_preview_but_not_applied(
    operator: Principal, downstream: RecordingHTTPServer, tmp_path: Path, settings: Any
) -> None:
    # given a tenant policy that denies transfers
    document = {
        "schema_version": 1,
        "revision": "preview-test",
        "default_effect": "allow",
        "tenants": {"acme": {"rules": [{"id": "no-transfers", "effect": "deny", "reason": "no", "match": RULE}]}},
    }
    (tmp_path / "policy.json").write_text(json.dumps(document))
    settings.SAGA_POLICY_MODE, settings.SAGA_POLICY_FILE = "json", str(tmp_path / "policy.json")
    _contracts(downstream.url)
    saga = coordinator.saga_begin(actor=operator, preview=True)
    # when the denied step is planned and run in a preview, nothing refuses
    _plan_order(operator, saga.id)
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=0)
    # then the report says what the policy would have done, and the decisions are evidence marked preview
    denied = preview_report(actor=operator, saga_id=saga.id)["would_be_denied"]
    assert [d["action"] for d in denied] == ["transfer"] and "no-transfers" in denied[0]["why"]
    decisions = AuditEvent.objects.filter(saga_id=saga.id, event_type="POLICY_DECISION", status="DENY")
    assert decisions.exists() and all(d.data["preview"] is True for d in decisions)
    # while the same plan in a real saga is refused at planning
    real = coordinator.saga_begin(actor=operator)
    coordinator.node_plan(actor=operator, saga_id=real.id, action="reserve", input={"sku": "X"}, key="reserve")
    with pytest.raises(SagaError, match=r"[Pp]olicy"):
        coordinator.node_plan(actor=operator, saga_id=real.id, action="transfer", input={"amount": 1}, key="t")


def test_report_and_command_refuse_a_real_saga_and_print_a_preview(
    operator: Principal, downstream: RecordingHTTPServer, capsys: pytest.CaptureFixture[str]
) -> None:
    _contracts(downstream.url)
    real = coordinator.saga_begin(actor=operator)
    with pytest.raises(SagaError) as refused:
        preview_report(actor=operator, saga_id=real.id)
    assert refused.value.code == "NOT_A_PREVIEW"
    saga = coordinator.saga_begin(actor=operator, preview=True)
    _plan_order(operator, saga.id)
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=0)
    call_command("preview_report", str(saga.id))
    out = capsys.readouterr().out
    assert "irreversible" in out and "would wait for approval" in out and "compensation plan" in out
