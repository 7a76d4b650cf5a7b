"""A card charge that waits for approval, for the tests of what approvers see on every surface."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from django.contrib.auth.models import Permission, User
from django.test import Client as ConsoleClient

from governance.identity.principal import Principal
from governance.models import OperatorProfile
from sagas import coordinator
from sagas.models import Node, Saga
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer

CHARGE_INPUT = {"amount": 4200, "currency": "EUR", "card": "tok_visa_4242"}
# Longer than any preview: the surfaces fold it and keep the whole value one step away.
LONG_NOTE = "Customer asked on the phone to charge the deposit now; " * 4 + "END-OF-NOTE"


def plan_charge(actor: Principal, server: RecordingHTTPServer, **extra_input: Any) -> tuple[Saga, Node]:
    """A saga with one `charge` node whose contract requires approval and whose compensation POSTs /refunds."""
    schema = {
        "type": "object",
        "required": ["amount", "currency"],
        "properties": {"amount": {"type": "integer"}, "currency": {"type": "string"}},
    }
    register(
        http_contract("charge", server.url, approval_required=True, input_schema=schema, compensation_path="/refunds")
    )
    saga = coordinator.saga_begin(actor=actor)
    payload = {**CHARGE_INPUT, **extra_input}
    node = coordinator.node_plan(actor=actor, saga_id=saga.id, action="charge", input=payload, key="charge")
    return saga, node


def digest_of(value: Any) -> str:
    """SHA-256 of canonical JSON (sorted keys, no spaces, UTF-8), computed here independently of the coordinator."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def context_block(html: str, approval_id: object) -> str:
    """The HTML of one approval's context block on a console page (AssertionError when the page has none)."""
    start = html.index(f'id="approval-context-{approval_id}"')
    return html[start : html.index("</div>", start)]  # the block nests no other div


def text_of(html: str) -> str:
    """What a reader sees: tags dropped, whitespace collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def console_operator(username: str, tenant: str) -> ConsoleClient:
    """A logged-in console client of a staff user who is an operator of `tenant`."""
    user = User.objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__startswith="view_"))
    OperatorProfile.objects.create(user=user, tenant_id=tenant, role="operator")
    console = ConsoleClient()
    assert console.login(username=username, password="pw")
    return console
