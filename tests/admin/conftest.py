"""Operator console fixtures: staff accounts with a tenant and role, and sagas in the states the screens show.

Accounts get exactly what an SSO operator gets (governance.identity.oidc): staff, the view permissions of our apps, and
an OperatorProfile naming tenant and role. Sagas are built through the coordinator, as every test here does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.http import HttpResponse
from django.test import Client

from governance.identity.principal import Principal
from governance.models import OperatorProfile
from sagas import coordinator
from sagas.models import Node, Saga
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer

Login = Callable[..., Client]


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    """Console actions commit for real: the executor threads that run approved nodes must see the rows."""


@pytest.fixture
def login() -> Login:
    def make(username: str, tenant: str | None = "acme", role: str = "operator") -> Client:
        user = User.objects.create_user(username, password="pw", is_staff=True)
        user.user_permissions.add(
            *Permission.objects.filter(
                content_type__app_label__in=("sagas", "audit", "registry"), codename__startswith="view_"
            )
        )
        if tenant is not None:
            OperatorProfile.objects.create(user=user, tenant_id=tenant, role=role)
        client = Client()
        assert client.login(username=username, password="pw")
        return client

    return make


@pytest.fixture
def olga(login: Login) -> Client:
    """An operator of acme (the operator persona's tenant)."""
    return login("olga", "acme", "operator")


@pytest.fixture
def vera(login: Login) -> Client:
    """A viewer of acme: sees every screen, may change nothing."""
    return login("vera", "acme", "viewer")


def messages_of(response: HttpResponse) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]  # type: ignore[attr-defined]


def gated_saga(
    actor: Principal, server: RecordingHTTPServer, *, keys: tuple[str, ...] = ("wire",)
) -> tuple[Saga, list[Node]]:
    """A saga whose nodes each wait for approval (contract `wire` requires one)."""
    register(http_contract("wire", server.url, approval_required=True))
    saga = coordinator.saga_begin(actor=actor)
    nodes = [
        coordinator.node_plan(actor=actor, saga_id=saga.id, action="wire", input={"n": key}, key=key) for key in keys
    ]
    return saga, nodes


def failed_saga(actor: Principal, server: RecordingHTTPServer, **contract: Any) -> tuple[Saga, Node]:
    """A pause-mode saga whose only node exhausted its attempts: RECOVERY_REQUIRED, node FAILED."""
    register(http_contract("provision", server.url, max_attempts=1, failure_mode="pause", **contract))
    server.script("/provision", [(500, {"error": "down"})])
    saga = coordinator.saga_begin(actor=actor)
    node = coordinator.node_plan(actor=actor, saga_id=saga.id, action="provision", input={}, key="provision")
    coordinator.saga_run_ready(actor=actor, saga_id=saga.id)
    saga.refresh_from_db()
    node.refresh_from_db()
    return saga, node
