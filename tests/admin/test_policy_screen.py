"""The policy page: the tenant's governance status and its newest POLICY_DECISION evidence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.test import Client

from governance.identity.principal import Principal
from sagas import coordinator
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer

POLICY = "/admin/sagas/saga/policy/"


def test_policy_page_without_a_backend_says_nothing_is_decided(olga: Client):
    html = olga.get(POLICY).content.decode()
    assert 'id="policy-backend">none<' in html and 'id="policy-decisions-empty"' in html


def test_policy_page_lists_the_tenants_decisions(
    olga: Client,
    operator: Principal,
    outsider: Principal,
    downstream: RecordingHTTPServer,
    tmp_path: Path,
    settings: Any,
):
    # given a JSON policy that gates high risk for acme, and decisions in acme and in globex
    document = {
        "schema_version": 1,
        "revision": "rev-7",
        "default_effect": "allow",
        "tenants": {"acme": {"approval_at_or_above_risk": "high", "budgets": {"max_parallel": 8}}},
    }
    (tmp_path / "policy.json").write_text(json.dumps(document))
    settings.SAGA_POLICY_MODE, settings.SAGA_POLICY_FILE = "json", str(tmp_path / "policy.json")
    contract = http_contract("wire", downstream.url)
    contract["semantic"]["risk"] = "high"
    register(contract)
    mine = coordinator.saga_begin(actor=operator)
    coordinator.node_plan(actor=operator, saga_id=mine.id, action="wire", input={})
    theirs = coordinator.saga_begin(actor=outsider)
    coordinator.node_plan(actor=outsider, saga_id=theirs.id, action="wire", input={})
    # when
    html = olga.get(POLICY).content.decode()
    # then acme's status and its decision are shown, globex's decision is not
    assert 'id="policy-backend">json<' in html and "rev-7" in html and "max_parallel: 8" in html
    assert "require_approval" in html and str(mine.id)[:10] in html
    assert str(theirs.id)[:10] not in html
