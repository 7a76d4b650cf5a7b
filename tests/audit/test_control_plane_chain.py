"""Operator changes are audit evidence: kill switch, action contracts and policy revisions in control-plane chains.

Each change goes through its real entry point (the service, the management command, the admin screen), and the
chain is read back from the database and checked by the real `verify_audit` command.
"""

from __future__ import annotations

import io
import json
import os
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.db import connection
from django.test import Client

from audit import control_plane
from audit.chain import verify_chain
from audit.models import AuditEvent, ControlPlaneChain, EventType
from governance.identity.principal import Principal
from governance.kill_switch import kill_switch_engage, kill_switch_release
from governance.models import KillSwitch, OperatorProfile
from governance.policy import engine as policy
from registry.models import ActionDefinition
from tests.audit.helpers import run_verify_audit
from tests.contracts import http_contract

DEPLOYMENT = control_plane.SYSTEM_TENANT
SECRET_VALUE = "tok-live-9f8e7d6c5b4a"


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    """Kill switch changes run in durable transactions of their own, as they do in production."""


@pytest.fixture
def admin_of_acme() -> Principal:
    return Principal("root", "acme", roles=frozenset({"admin"}), authenticated=True)


def chain(tenant: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(saga_id=control_plane.chain_id(tenant)).order_by("sequence"))


def _operator_client(username: str, tenant: str, role: str = "viewer") -> Client:
    user = User.objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="audit", codename__startswith="view_"))
    OperatorProfile.objects.create(user=user, tenant_id=tenant, role=role)
    client = Client()
    assert client.login(username=username, password="pw")
    return client


def registry_file(path: Path, *contracts: dict[str, Any]) -> str:
    path.write_text(json.dumps({"schema_version": 1, "actions": list(contracts)}), encoding="utf-8")
    return str(path)


def payments(version: str = "1.0.0", *, active: bool = True) -> dict[str, Any]:
    """A contract whose header reads a secret from the environment: the chain must never hold its value."""
    header = {"Authorization": {"secret_ref": "env://PAYMENTS_TOKEN", "prefix": "Bearer "}}
    return http_contract("charge", "http://127.0.0.1:9", version=version, headers=header, active=active)


def load(path: str) -> str:
    out = io.StringIO()
    call_command("load_actions", path, stdout=out)
    return out.getvalue()


def test_chain_ids_match_the_documented_vector():
    # docs/audit_hash.md: anyone recomputes a tenant's chain id from the fixed namespace
    assert control_plane.chain_id("acme") == uuid.UUID("437543c5-7098-58f8-8812-2e48233be637")
    assert control_plane.is_control_plane("437543c5-7098-58f8-8812-2e48233be637", "acme")
    assert not control_plane.is_control_plane(uuid.uuid4(), "acme")


# --- kill switch --------------------------------------------------------------------------------------------------


def test_engage_and_release_are_chained_with_actor_scope_and_no_reason_text(admin_of_acme: Principal):
    # when a tenant admin engages a tenant-wide and a saga switch, engages the tenant one again, then releases
    saga_id = uuid.uuid4()
    switch = kill_switch_engage(actor=admin_of_acme, reason="incident 7: card processor double charges")
    kill_switch_engage(actor=admin_of_acme, reason="incident 8", saga_id=saga_id)
    kill_switch_engage(actor=admin_of_acme, reason="already on")
    assert kill_switch_release(actor=admin_of_acme)
    assert not kill_switch_release(actor=admin_of_acme)
    # then acme's control-plane chain holds exactly the three changes, in order, with who and what
    events = chain("acme")
    assert [(e.sequence, e.event_type, e.status) for e in events] == [
        (1, EventType.KILL_SWITCH_ENGAGED, "engaged"),
        (2, EventType.KILL_SWITCH_ENGAGED, "engaged"),
        (3, EventType.KILL_SWITCH_RELEASED, "released"),
    ]
    assert {(e.actor_principal_id, e.actor_type, e.tenant_id) for e in events} == {("root", "user", "acme")}
    assert events[0].data["scope"] == "tenant" and events[0].data["switch_id"] == switch.pk
    assert events[1].data == {**events[1].data, "scope": "saga", "saga_id": str(saga_id)}
    assert events[2].data["engaged_by"] == "root" and events[2].data["switch_id"] == switch.pk
    assert all("incident" not in json.dumps(e.data) for e in events)
    assert len(events[0].data["reason_sha256"]) == 64
    assert verify_chain(control_plane.chain_id("acme")).valid
    assert ControlPlaneChain.objects.get(tenant_id="acme").head_hash == events[-1].event_hash


def test_the_command_line_names_the_os_account_as_actor():
    call_command("kill_switch", "engage", "--tenant", "globex", "--reason", "maintenance", stdout=io.StringIO())
    call_command("kill_switch", "release", "--tenant", "globex", stdout=io.StringIO())
    expected = f"cli:{control_plane.os_user()}"
    assert [(e.event_type, e.actor_principal_id, e.actor_type) for e in chain("globex")] == [
        (EventType.KILL_SWITCH_ENGAGED, expected, "cli"),
        (EventType.KILL_SWITCH_RELEASED, expected, "cli"),
    ]


def test_the_admin_screen_names_the_signed_in_operator_as_actor():
    ada = _operator_client("ada", "acme", role="admin")
    ada.post("/admin/governance/killswitch/engage/", {"saga_id": "", "reason": "incident 9"})
    switch = KillSwitch.objects.get(tenant_id="acme")
    ada.post(f"/admin/governance/killswitch/{switch.pk}/release/")
    assert [(e.event_type, e.actor_principal_id, e.actor_type) for e in chain("acme")] == [
        (EventType.KILL_SWITCH_ENGAGED, "user:ada", "user"),
        (EventType.KILL_SWITCH_RELEASED, "user:ada", "user"),
    ]


# --- action registry ----------------------------------------------------------------------------------------------


def test_loading_records_each_contract_once_and_an_identical_reload_records_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("PAYMENTS_TOKEN", SECRET_VALUE)
    # given a file with one contract, loaded by hand
    path = registry_file(tmp_path / "actions.json", payments())
    load(path)
    row = ActionDefinition.objects.get(action_id="charge")
    [registered] = chain(DEPLOYMENT)
    assert (registered.event_type, registered.action, registered.action_version, registered.status) == (
        EventType.ACTION_REGISTERED,
        "charge",
        "1.0.0",
        "active",
    )
    assert registered.data == {"definition_hash": row.definition_hash, "kind": "http", "file": path}
    assert (registered.actor_principal_id, registered.actor_type) == (f"cli:{control_plane.os_user()}", "cli")
    # when the same file is loaded again (as serve does at every start)
    assert "1 unchanged" in load(path)
    # then nothing is written
    assert len(chain(DEPLOYMENT)) == 1
    # and no event carries the secret, its reference or the contract's content
    text = json.dumps([e.data for e in AuditEvent.objects.all()])
    assert SECRET_VALUE not in text and "PAYMENTS_TOKEN" not in text and "127.0.0.1" not in text


def test_a_new_version_deactivation_and_reactivation_are_chained_with_previous_state(tmp_path: Path):
    load(registry_file(tmp_path / "v1.json", payments("1.0.0")))
    # when v2 replaces v1, then v2 is retired, then v1 is brought back
    load(registry_file(tmp_path / "v2.json", payments("1.0.0", active=False), payments("2.0.0")))
    load(registry_file(tmp_path / "v2-off.json", payments("2.0.0", active=False)))
    load(registry_file(tmp_path / "v1-on.json", payments("1.0.0")))
    # then every flip is an event naming version, hash and previous state
    events = chain(DEPLOYMENT)
    hashes = dict(ActionDefinition.objects.values_list("version", "definition_hash"))
    assert [(e.event_type, e.action_version, e.status, e.data.get("previous")) for e in events] == [
        (EventType.ACTION_REGISTERED, "1.0.0", "active", None),
        (EventType.ACTION_DEACTIVATED, "1.0.0", "inactive", "active"),
        (EventType.ACTION_REGISTERED, "2.0.0", "active", None),
        (EventType.ACTION_DEACTIVATED, "2.0.0", "inactive", "active"),
        (EventType.ACTION_ACTIVATED, "1.0.0", "active", "inactive"),
    ]
    assert all(e.data["definition_hash"] == hashes[e.action_version] for e in events)
    assert run_verify_audit("--tenant", DEPLOYMENT)[0] == 0


def test_a_registration_without_an_actor_is_the_process(tmp_path: Path):
    from registry.services import action_register

    action_register(payments())
    [event] = chain(DEPLOYMENT)
    assert event.actor_type == "process" and event.actor_principal_id.startswith(f"process:{control_plane.os_user()}@")


# --- policy revision ----------------------------------------------------------------------------------------------


def _policy_file(path: Path, revision: str, effect: str = "allow") -> None:
    document = {"schema_version": 1, "revision": revision, "default_effect": effect, "tenants": {"acme": {}}}
    path.write_text(json.dumps(document), encoding="utf-8")
    # A distinct modification time per write, as an editor's save has: the engine reloads on it.
    stamp = path.stat().st_mtime_ns if path.exists() else 0
    os.utime(path, ns=(stamp + 1_000_000_000, stamp + 1_000_000_000))


def _forget_loaded_policy() -> None:
    """What a freshly started process knows: no policy loaded, nothing seen recorded."""
    policy._loaded.update(key=None, engine=None)
    policy._recorded.update(key=None)


def test_a_policy_revision_change_is_recorded_once_whatever_the_number_of_processes(tmp_path: Path, settings: Any):
    # given a JSON policy in force
    path = tmp_path / "policy.json"
    _policy_file(path, "2026-12-01.1")
    settings.SAGA_POLICY_MODE, settings.SAGA_POLICY_FILE = "json", str(path)
    _forget_loaded_policy()
    policy.engine()
    policy.engine()
    # when a second process starts with the same policy, and then the file is edited to a new revision
    _forget_loaded_policy()
    policy.engine()
    _policy_file(path, "2026-12-01.2", effect="deny")
    policy.engine()
    # then the chain holds two revisions, the second naming the first
    events = chain(DEPLOYMENT)
    assert [(e.event_type, e.status, e.data["revision"]) for e in events] == [
        (EventType.POLICY_REVISION_CHANGED, "json", "2026-12-01.1"),
        (EventType.POLICY_REVISION_CHANGED, "json", "2026-12-01.2"),
    ]
    first, second = (e.data for e in events)
    assert first["previous"] is None and first["file"] == str(path) and len(first["policy_sha256"]) == 64
    previous = {"backend": "json", "revision": "2026-12-01.1", "policy_sha256": first["policy_sha256"]}
    assert second["previous"] == previous
    assert events[0].actor_type == "process"
    # and switching the policy off is a change too
    settings.SAGA_POLICY_MODE = "none"
    assert policy.engine() is None
    assert chain(DEPLOYMENT)[-1].data["backend"] == "none"


# --- tampering ----------------------------------------------------------------------------------------------------


@pytest.fixture
def acme_chain(admin_of_acme: Principal) -> str:
    """Four kill switch changes in acme's control-plane chain; returns its chain id."""
    for _ in range(2):
        kill_switch_engage(actor=admin_of_acme, reason="drill")
        kill_switch_release(actor=admin_of_acme)
    assert run_verify_audit()[0] == 0
    return str(control_plane.chain_id("acme"))


@pytest.mark.parametrize(
    ("tamper", "sequence"),
    [("data", 2), ("status", 3), ("delete_middle", 2), ("reorder", 2), ("delete_newest", 4)],
)
def test_tampering_with_a_control_plane_event_fails_verification_naming_chain_and_sequence(
    acme_chain: str, tamper: str, sequence: int
):
    rows = AuditEvent.objects.filter(saga_id=acme_chain)
    if tamper == "data":
        rows.filter(sequence=2).update(data={"switch_id": 0, "scope": "saga"})
    elif tamper == "status":
        rows.filter(sequence=3).update(status="released")
    elif tamper == "reorder":
        rows.filter(sequence=2).update(sequence=99)
        rows.filter(sequence=3).update(sequence=2)
        rows.filter(sequence=99).update(sequence=3)
    else:
        rows.filter(sequence=2 if tamper == "delete_middle" else 4).delete()
    code, text = run_verify_audit()
    assert code == 1
    assert f"BROKEN control-plane chain {acme_chain} (tenant acme) at sequence {sequence}:" in text
    # and the tenant filter finds it too, in the JSON report
    code, text = run_verify_audit("--tenant", "acme", "--json")
    [broken] = json.loads(text)["broken"]
    assert code == 1 and (broken["chain_kind"], broken["failed_sequence"]) == ("control-plane", sequence)


def test_a_deleted_head_row_is_reported(acme_chain: str):
    ControlPlaneChain.objects.filter(tenant_id="acme").delete()
    code, text = run_verify_audit()
    assert code == 1 and f"BROKEN control-plane chain {acme_chain}" in text and "head row" in text


# --- audit admin --------------------------------------------------------------------------------------------------


def test_the_audit_admin_lists_control_plane_events_of_the_tenant_and_the_deployment(
    admin_of_acme: Principal, tmp_path: Path
):
    # given a switch engaged in acme, one in globex, and a registry change
    kill_switch_engage(actor=admin_of_acme, reason="drill")
    kill_switch_engage(actor=Principal("g", "globex", roles=frozenset({"admin"})), reason="theirs")
    load(registry_file(tmp_path / "actions.json", payments()))
    vera = _operator_client("vera", "acme")
    # when acme's viewer lists control-plane events
    page = vera.get("/admin/audit/auditevent/", {"chain_kind": "control-plane"}).content.decode()
    # then she sees acme's and the deployment's, never globex's
    assert "KILL_SWITCH_ENGAGED" in page and "control plane: tenant acme" in page
    assert "ACTION_REGISTERED" in page and "control plane: deployment" in page
    assert str(control_plane.chain_id("globex")) not in page
    sagas_only = vera.get("/admin/audit/auditevent/", {"chain_kind": "saga"}).content.decode()
    assert "control plane:" not in sagas_only
    event = chain("acme")[0]
    detail = vera.get(f"/admin/audit/auditevent/{event.pk}/change/").content.decode()
    assert "control plane" in detail and event.event_hash in detail


# --- concurrency --------------------------------------------------------------------------------------------------


@pytest.mark.postgres_only
def test_concurrent_engagements_of_one_tenant_make_one_valid_chain(admin_of_acme: Principal):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent appends need PostgreSQL row locks: runs in the PostgreSQL pass")
    workers = 6
    start = threading.Barrier(workers)
    failures: list[BaseException] = []

    def engage(saga_id: uuid.UUID | None) -> None:
        try:
            start.wait()
            kill_switch_engage(actor=admin_of_acme, reason="race", saga_id=saga_id)
        except BaseException as exc:  # reported to the test thread below
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=engage, args=(None if i == 0 else uuid.uuid4(),)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert KillSwitch.objects.filter(tenant_id="acme").count() == workers
    assert [e.sequence for e in chain("acme")] == list(range(1, workers + 1))
    assert verify_chain(control_plane.chain_id("acme")).valid and run_verify_audit()[0] == 0
