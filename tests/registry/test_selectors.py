from __future__ import annotations

from typing import Any

import pytest

from registry.errors import RegistryError
from registry.selectors import action_detail, action_get, action_list, action_summary
from registry.services import action_register, registry_load_file
from tests.registry.conftest import EXAMPLE_REGISTRY

pytestmark = pytest.mark.django_db


def test_action_get_returns_active_version(http_contract: dict[str, Any]) -> None:
    # given 1.0.0 replaced by 2.0.0
    action_register(http_contract)
    action_register(dict(http_contract, version="2.0.0"))
    # when the active version is asked for
    # then 2.0.0 comes back, and 1.0.0 only on request
    assert action_get("charge").version == "2.0.0"
    assert action_get("charge", "1.0.0", include_inactive=True).version == "1.0.0"


def test_action_get_unknown_action_not_found() -> None:
    with pytest.raises(RegistryError) as caught:
        action_get("launch_rocket")
    assert caught.value.code == "ACTION_NOT_FOUND"
    assert "Call list_actions" in caught.value.message


def test_action_get_unknown_version_lists_versions(http_contract: dict[str, Any]) -> None:
    # given 1.0.0 and 2.0.0
    action_register(http_contract)
    action_register(dict(http_contract, version="2.0.0"))
    # when a version that does not exist is asked for
    with pytest.raises(RegistryError) as caught:
        action_get("charge", "3.0.0")
    # then the available versions are listed
    assert caught.value.code == "ACTION_NOT_FOUND"
    assert "registered: 2.0.0 (active), 1.0.0" in caught.value.message
    assert "list_actions" in caught.value.message


def test_action_get_inactive_version_refused(http_contract: dict[str, Any]) -> None:
    # given 1.0.0 replaced by 2.0.0
    action_register(http_contract)
    action_register(dict(http_contract, version="2.0.0"))
    # when the retired version is asked for (for execution)
    with pytest.raises(RegistryError) as caught:
        action_get("charge", "1.0.0")
    # then
    assert caught.value.code == "ACTION_INACTIVE"
    assert "charge@1.0.0 is inactive" in caught.value.message


def test_action_get_no_active_version(http_contract: dict[str, Any]) -> None:
    # given only an inactive version
    action_register(dict(http_contract, active=False))
    # when the active version is asked for
    with pytest.raises(RegistryError) as caught:
        action_get("charge")
    # then
    assert caught.value.code == "ACTION_INACTIVE"
    assert "registered: 1.0.0" in caught.value.message


def test_action_list_active_only_by_default(http_contract: dict[str, Any]) -> None:
    # given two versions of one action
    action_register(http_contract)
    action_register(dict(http_contract, version="2.0.0"))
    # when listed
    # then
    assert [row.version for row in action_list()] == ["2.0.0"]
    assert [row.version for row in action_list(include_inactive=True)] == ["2.0.0", "1.0.0"]


def test_action_summary_and_detail_shapes() -> None:
    # given the example registry
    registry_load_file(EXAMPLE_REGISTRY)
    row = action_get("charge_card")
    # when summarised and detailed
    summary, detail = action_summary(row), action_detail(row)
    # then the parity fields are present and the detail adds the snapshot and resolved policy
    assert {"id", "version", "kind", "definition_hash", "semantic", "input_schema", "output_schema"} <= set(summary)
    assert {"execution_policy", "active"} <= set(summary)
    assert summary["semantic"]["risk"] == "high"
    assert detail["definition"] == row.definition
    assert detail["resolved_execution_policy"]["compensation"]["max_attempts"] == 8
    assert detail["resolved_execution_policy"]["compensation"]["initial_backoff_seconds"] == 0.5
