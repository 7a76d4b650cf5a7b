from __future__ import annotations

import pytest
from django.test import Client

from registry.models import ActionDefinition
from registry.services import registry_load_file
from tests.registry.conftest import EXAMPLE_REGISTRY

pytestmark = pytest.mark.django_db


def test_action_admin_lists_and_is_read_only(admin_client: Client) -> None:
    # given the example registry
    registry_load_file(EXAMPLE_REGISTRY)
    row = ActionDefinition.objects.get(action_id="charge_card")
    # when an admin opens the list, the detail and the add page
    listing = admin_client.get("/admin/registry/actiondefinition/")
    detail = admin_client.get(f"/admin/registry/actiondefinition/{row.pk}/change/")
    add = admin_client.get("/admin/registry/actiondefinition/add/")
    # then contracts are visible but cannot be added (or edited: no save button)
    assert listing.status_code == 200
    assert row.definition_hash[:12] in listing.content.decode()
    assert detail.status_code == 200
    assert b'name="_save"' not in detail.content
    assert add.status_code == 403
