from __future__ import annotations

import json
from typing import Any

from registry.contracts import definition_hash, stored_definition


def test_definition_hash_stable_across_key_order(http_contract: dict[str, Any]) -> None:
    # given the same contract with its keys in reverse order, at every level
    def reverse(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: reverse(value[key]) for key in reversed(list(value))}
        return value

    reordered = reverse(http_contract)
    assert json.dumps(reordered) != json.dumps(http_contract)
    # when both are hashed
    # then the hashes are equal (canonical JSON sorts keys)
    assert definition_hash(reordered) == definition_hash(http_contract)


def test_definition_hash_changes_with_content(http_contract: dict[str, Any]) -> None:
    # given a contract and a copy with a different timeout
    before = definition_hash(http_contract)
    http_contract["forward"]["timeout_seconds"] = 5
    # when hashed again
    # then the hash differs
    assert definition_hash(http_contract) != before


def test_definition_hash_ignores_active_flag(http_contract: dict[str, Any]) -> None:
    # given the same contract marked active and inactive
    inactive = dict(http_contract, active=False)
    # when hashed and snapshotted
    # then activation state is not part of the contract's identity or snapshot
    assert definition_hash(inactive) == definition_hash(http_contract)
    assert "active" not in stored_definition(inactive)
    assert definition_hash(stored_definition(inactive)) == definition_hash(inactive)


def test_definition_hash_is_sha256_hex(http_contract: dict[str, Any]) -> None:
    # given / when
    digest = definition_hash(http_contract)
    # then
    assert len(digest) == 64
    assert set(digest) <= set("0123456789abcdef")
