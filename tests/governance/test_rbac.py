"""Capabilities from roles and scopes, and the refusal when one is missing (enforced by the coordinator for every
surface; what each operation needs is the operation table's, tests/operations/)."""

from __future__ import annotations

import pytest

from governance.errors import Forbidden
from governance.identity.principal import Principal
from governance.identity.rbac import ADMIN, DECIDE, EXECUTE, Capability, authorize, capabilities
from sagas import coordinator, selectors
from sagas.states import SagaStatus
from tests.conftest import make_principal


def _with_scopes(principal: Principal, *scopes: str) -> Principal:
    return Principal(
        principal_id=principal.principal_id,
        tenant_id=principal.tenant_id,
        roles=principal.roles,
        scopes=frozenset(scopes),
        authenticated=True,
    )


@pytest.fixture
def viewer() -> Principal:
    return make_principal("vera", "acme", "viewer")


def test_a_refusal_names_the_operation_the_capability_and_how_to_get_it(viewer: Principal):
    with pytest.raises(Forbidden) as refused:
        authorize(viewer, EXECUTE, "policy_status_other_tenant")
    assert refused.value.extra == {"operation": "policy_status_other_tenant", "capability": "execute"}
    assert refused.value.message.startswith("vera may not policy status other tenant: it needs the 'execute'")
    assert (
        "role agent, operator or admin, or scope semantic-saga:call, semantic-saga:execute or" in refused.value.message
    )
    assert "this principal holds: read" in refused.value.message


def test_viewer_reads_but_cannot_commit(transactional_db: None, operator: Principal, viewer: Principal):
    # given a saga started by an operator of the same tenant
    saga = coordinator.saga_begin(actor=operator)
    # when the viewer reads it: allowed
    assert selectors.saga_get(actor=viewer, saga_id=saga.id).id == saga.id
    assert [s.id for s in selectors.saga_list(actor=viewer).sagas] == [saga.id]
    # when the viewer commits: refused, with what to do next, and nothing changed
    with pytest.raises(Forbidden) as refused:
        coordinator.saga_commit(actor=viewer, saga_id=saga.id)
    assert refused.value.code == "FORBIDDEN" and "execute" in refused.value.message
    assert "Ask an admin" in refused.value.message
    assert selectors.saga_get(actor=operator, saga_id=saga.id).status == SagaStatus.ACTIVE
    with pytest.raises(Forbidden):
        coordinator.saga_begin(actor=viewer)


def test_scopes_are_a_ceiling_on_roles():
    admin_with_read_token = _with_scopes(make_principal("ada", "acme", "admin"), "semantic-saga:read")
    assert capabilities(admin_with_read_token) == {Capability.READ}
    with pytest.raises(Forbidden):
        authorize(admin_with_read_token, EXECUTE, "commit")


def test_an_agent_executes_but_never_decides():
    for agent in (
        make_principal("ava", "acme", "agent"),
        _with_scopes(make_principal("bot", "acme"), "semantic-saga:call"),
    ):
        assert capabilities(agent) == {Capability.READ, Capability.EXECUTE}
        authorize(agent, EXECUTE, "run")
        with pytest.raises(Forbidden) as refused:
            authorize(agent, DECIDE, "approve")
        assert "role operator or admin, or scope semantic-saga:execute or semantic-saga:admin" in refused.value.message
    assert DECIDE in capabilities(make_principal("olga", "acme", "operator"))


def test_scopes_alone_grant_their_capability():
    agent = _with_scopes(make_principal("bot", "acme"), "semantic-saga:execute", "openid")
    authorize(agent, EXECUTE, "run")
    with pytest.raises(Forbidden):
        authorize(agent, ADMIN, "load_actions")


def test_unknown_roles_and_foreign_scopes_grant_nothing():
    stranger = _with_scopes(make_principal("x", "acme", "superuser"), "repo:write")
    assert capabilities(stranger) == frozenset()


def test_same_tenant_principals_can_hand_a_saga_off(transactional_db: None, operator: Principal, approver: Principal):
    # given a saga begun by alice
    saga = coordinator.saga_begin(actor=operator, metadata={"step": "handoff"})
    coordinator.saga_checkpoint(actor=operator, saga_id=saga.id, name="alice-done")
    # when bob, in the same tenant, continues and commits it
    coordinator.saga_checkpoint(actor=approver, saga_id=saga.id, name="bob-took-over")
    committed = coordinator.saga_commit(actor=approver, saga_id=saga.id)
    # then it worked, and the creator stays on record
    assert committed.status == SagaStatus.COMMITTED and committed.creator_principal_id == "alice"
