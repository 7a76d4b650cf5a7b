"""The registry browser: versions, hashes and active flags, read-only contracts, and a diff between versions."""

from __future__ import annotations

from django.test import Client

from registry.models import ActionDefinition
from registry.services import registry_load_file
from tests.contracts import http_contract, register
from tests.registry.conftest import EXAMPLE_REGISTRY

CONTRACTS = "/admin/registry/actiondefinition/"
DIFF = f"{CONTRACTS}diff/"


def _two_versions() -> tuple[ActionDefinition, ActionDefinition]:
    old = register(http_contract("charge", "http://127.0.0.1:9", version="1.0.0", active=False))
    changed = http_contract("charge", "http://127.0.0.1:9", version="2.0.0", max_attempts=5)
    changed["semantic"]["risk"] = "high"
    return old, register(changed)


def test_registry_list_shows_versions_hashes_and_compare_links(olga: Client):
    old, new = _two_versions()
    html = olga.get("/admin/registry/actiondefinition/").content.decode()
    assert old.definition_hash[:12] in html and new.definition_hash[:12] in html
    assert 'id="compare-charge-2.0.0"' in html and 'id="tool-diff"' in html


def test_diff_defaults_to_the_newest_against_the_one_before(olga: Client):
    old, new = _two_versions()
    page = olga.get(DIFF, {"action": "charge"})
    assert page.status_code == 200
    html = page.content.decode()
    assert f"charge@1.0.0 ({old.definition_hash[:12]})" in html and f"charge@2.0.0 ({new.definition_hash[:12]})" in html
    assert '<span class="del">-      &quot;max_attempts&quot;: 3,</span>' in html
    assert '<span class="add">+      &quot;max_attempts&quot;: 5,</span>' in html
    assert '<span class="add">+    &quot;risk&quot;: &quot;high&quot;</span>' in html
    assert new.definition_hash in html  # the versions table shows full hashes


def test_diff_of_a_version_with_itself_says_so(olga: Client):
    _two_versions()
    html = olga.get(DIFF, {"action": "charge", "a": "2.0.0", "b": "2.0.0"}).content.decode()
    assert 'id="diff-same-version"' in html


def test_diff_without_an_action_offers_the_picker(olga: Client):
    _two_versions()
    html = olga.get(DIFF).content.decode()
    assert 'id="id_action"' in html and '<option value="charge">' in html


def test_contracts_are_read_only(olga: Client):
    old, _new = _two_versions()
    assert olga.get("/admin/registry/actiondefinition/add/").status_code == 403
    assert olga.post(f"/admin/registry/actiondefinition/{old.pk}/delete/", {"post": "yes"}).status_code == 403
    assert 'name="_save"' not in olga.get(f"/admin/registry/actiondefinition/{old.pk}/change/").content.decode()
    assert ActionDefinition.objects.count() == 2


def test_a_superuser_reads_every_contract_of_the_example_registry(admin_client: Client):
    # given the example registry
    registry_load_file(EXAMPLE_REGISTRY)
    rows = list(ActionDefinition.objects.order_by("action_id"))
    # when the installation's admin opens the list, then every contract is there with its short hash
    listing = admin_client.get(CONTRACTS).content.decode()
    for row in rows:
        assert f'id="compare-{row.action_id}-{row.version}"' in listing and row.definition_hash[:12] in listing
    # and a contract's page shows its full hash and stored definition, with nothing to save
    charge = next(row for row in rows if row.action_id == "charge_card")
    record = admin_client.get(f"{CONTRACTS}{charge.pk}/change/").content.decode()
    assert charge.definition_hash in record and "&quot;charge_card&quot;" in record
    assert 'name="_save"' not in record
