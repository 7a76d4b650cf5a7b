"""Schemathesis fuzzes every operation of the published OpenAPI schema, in-process over WSGI, as tenant acme.

Each generated request (valid and invalid, by schemathesis' positive and negative modes) must be answered without
a server error, with a documented status, content type and body; and no answer may ever contain anything of the
other tenant's saga (its id, node id or a marker in its metadata), even when the fuzzer is steered to its id.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import unquote

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from sagas import coordinator
from tests.api.conftest import ALICE, MALLORY, principal
from tests.contracts import http_contract, register
from tests.fuzz.hostile import OUTSIDER_MARKER, Seeded
from tests.httpserver import RecordingHTTPServer

# Examples per operation: about 20 operations x this many requests stays well under a minute on either database.
MAX_EXAMPLES = 15
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
HEADERS = {"Authorization": f"Bearer {ALICE}"}
CONFIG = f"""
[generation]
max-examples = {MAX_EXAMPLES}
database = "none"
# The bearer token is ours to send (HEADERS): generated Authorization values would only be overwritten.
with-security-parameters = false
"""


@pytest.fixture
def seeded(downstream: RecordingHTTPServer) -> Seeded:
    """One gated saga per tenant, both waiting for approval on a node keyed "w"."""
    register(http_contract("wire", downstream.url, approval_required=True))
    ids = []
    for token, metadata in ((ALICE, {"owner": "acme"}), (MALLORY, {"owner": OUTSIDER_MARKER})):
        actor = principal(token)
        saga = coordinator.saga_begin(actor=actor, metadata=metadata)
        node = coordinator.node_plan(actor=actor, saga_id=saga.id, action="wire", input={"m": metadata}, key="w")
        ids += [str(saga.id), str(node.id)]
    return Seeded(*ids)


# Loaded at import (pytest-django has set Django up by then; the schema endpoint needs no database). Not
# schemathesis.pytest.from_fixture: its lazy loader does not run under pytest 9.2 (Function._nodeid is gone).
schema = schemathesis.openapi.from_wsgi(
    "/api/v1/schema/", get_wsgi_application(), config=schemathesis.Config.from_str(CONFIG)
)
# The rows the running test seeded, for the path-parameter hook (it runs inside the test, after the fixtures).
current: dict[str, Seeded] = {}


@schema.hook
def flatmap_path_parameters(context: Any, path_parameters: dict[str, Any]) -> Any:
    # Steer a share of the ids to the seeded sagas and nodes (ours and the other tenant's), so that the fuzzer
    # reaches real rows and keeps knocking on the outsider's door, not only on random UUIDs.
    if not path_parameters:
        return st.just(path_parameters)
    seeded = current["seeded"]
    choices: dict[str, list[str]] = {
        "saga_id": [seeded.own_saga, seeded.outsider_saga],
        "node_id": [seeded.own_node, seeded.outsider_node, "w"],
    }
    # Only values that are valid already are swapped: a negative case must stay negative.
    strategies = {
        name: st.one_of(st.just(value), st.sampled_from(choices[name]))
        if name in choices and _valid(name, value)
        else st.just(value)
        for name, value in path_parameters.items()
    }
    return st.fixed_dictionaries(strategies)


def _valid(name: str, value: object) -> bool:
    if not isinstance(value, str):
        return False
    if name == "saga_id":
        try:
            uuid.UUID(value)
        except ValueError:
            return False
        return True
    return bool(value) and "/" not in value


@schema.parametrize()
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], deadline=None)
def test_every_operation_answers_as_documented_and_never_leaks_another_tenant(case: Any, seeded: Seeded):
    current["seeded"] = seeded
    response = case.call_and_validate(headers=HEADERS, checks=CHECKS)
    what = f"{case.method} {case.formatted_path}"
    _assert_nothing_of_globex(response, seeded, what)
    if (case.path_parameters or {}).get("saga_id") == seeded.outsider_saga:
        # The other tenant's saga must be indistinguishable from one that does not exist.
        missing = str(uuid.uuid4())
        case.path_parameters["saga_id"] = missing
        again = case.call(headers=HEADERS)
        assert again.status_code == response.status_code, what
        assert again.text.replace(missing, "<id>") == response.text.replace(seeded.outsider_saga, "<id>"), what


def _assert_nothing_of_globex(response: Any, seeded: Seeded, what: str) -> None:
    sent = unquote(response.request.url or "") + _text(response.request.body)
    text = response.text
    # Its data never appears: the marker sits only in the outsider saga's metadata and node input.
    assert OUTSIDER_MARKER not in text, f"{what} leaked the other tenant's data"
    # Its ids appear only as echoes of what the caller sent ("Saga not found: <id>").
    for secret in (seeded.outsider_saga, seeded.outsider_node):
        assert secret in sent or secret not in text, f"{what} leaked {secret}"
    if seeded.outsider_saga in unquote(response.request.url or ""):
        assert response.status_code >= 400, f"{what} answered {response.status_code} for the other tenant's saga"


def _text(body: object) -> str:
    if isinstance(body, bytes):
        return body.decode("utf-8", "replace")
    return str(body or "")
