from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from registry.contracts import definition_hash
from registry.errors import RegistryError
from registry.models import ActionDefinition
from registry.services import action_register

pytestmark = pytest.mark.django_db


def test_action_register_creates_row(http_contract: dict[str, Any]) -> None:
    # given a new contract
    # when registered
    row, outcome = action_register(http_contract)
    # then one active row holds the snapshot and its hash
    assert outcome == "created"
    assert (row.action_id, row.version, row.kind, row.active) == ("charge", "1.0.0", "http", True)
    assert row.definition == http_contract
    assert row.definition_hash == definition_hash(http_contract)


def test_action_register_same_content_unchanged(http_contract: dict[str, Any]) -> None:
    # given a registered contract
    first, _ = action_register(http_contract)
    # when the same content is registered again (keys in another order)
    again, outcome = action_register(dict(reversed(list(http_contract.items()))))
    # then nothing changes
    assert outcome == "unchanged"
    assert again.pk == first.pk
    assert ActionDefinition.objects.count() == 1


def test_action_register_same_version_other_content_refused(http_contract: dict[str, Any]) -> None:
    # given a registered contract
    original, _ = action_register(http_contract)
    # when the same id+version is registered with different content
    http_contract["forward"]["timeout_seconds"] = 3
    with pytest.raises(RegistryError) as caught:
        action_register(http_contract)
    # then it is refused, told to use a new version, and nothing was written
    assert caught.value.code == "ACTION_VERSION_CONFLICT"
    assert "register it as a new version" in caught.value.message
    assert list(ActionDefinition.objects.values_list("definition_hash", flat=True)) == [original.definition_hash]


def test_action_register_new_active_version_deactivates_old(http_contract: dict[str, Any]) -> None:
    # given version 1.0.0 active
    old, _ = action_register(http_contract)
    # when 2.0.0 is registered active
    new, outcome = action_register(dict(http_contract, version="2.0.0"))
    # then 2.0.0 is the only active version
    old.refresh_from_db()
    assert outcome == "created"
    assert (old.active, new.active) == (False, True)


def test_action_register_reactivates_old_version(http_contract: dict[str, Any]) -> None:
    # given 1.0.0 replaced by 2.0.0
    old, _ = action_register(http_contract)
    new, _ = action_register(dict(http_contract, version="2.0.0"))
    # when 1.0.0 is registered (active) again
    row, outcome = action_register(http_contract)
    # then it is activated and 2.0.0 deactivated
    new.refresh_from_db()
    assert (row.pk, outcome, row.active, new.active) == (old.pk, "activated", True, False)


def test_action_register_inactive_contract_keeps_current_active(http_contract: dict[str, Any]) -> None:
    # given 1.0.0 active
    current, _ = action_register(http_contract)
    # when 2.0.0 is registered with active false
    staged, outcome = action_register(dict(http_contract, version="2.0.0", active=False))
    # then it is stored inactive and 1.0.0 stays active
    current.refresh_from_db()
    assert (outcome, staged.active, current.active) == ("created", False, True)


def test_action_register_active_false_retires_version(http_contract: dict[str, Any]) -> None:
    # given an active version
    row, _ = action_register(http_contract)
    # when the same contract is registered with active false
    again, outcome = action_register(dict(http_contract, active=False))
    # then that version is deactivated (active is state, not content)
    row.refresh_from_db()
    assert (again.pk, outcome, row.active) == (row.pk, "deactivated", False)


def test_action_register_invalid_contract_writes_nothing(http_contract: dict[str, Any]) -> None:
    # given an invalid contract
    http_contract["execution_policy"] = {"forward": {"max_attempts": 0}}
    # when registered
    with pytest.raises(RegistryError) as caught:
        action_register(http_contract)
    # then
    assert caught.value.code == "INVALID_CONTRACT"
    assert not ActionDefinition.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_action_register_refuses_to_nest_in_a_transaction(http_contract: dict[str, Any]) -> None:
    # given an open transaction (TestCase-style tests skip the durability check, so this one is transactional)
    # when registering inside it
    # then the durable block refuses: registration must commit on its own
    with pytest.raises(RuntimeError, match="durable"), transaction.atomic():
        action_register(http_contract)
