from __future__ import annotations

import pytest

from governance.identity.principal import Principal
from sagas import coordinator, selectors
from sagas.errors import NotFound


def test_another_tenant_sees_saga_not_found(operator: Principal, outsider: Principal):
    saga = coordinator.saga_begin(actor=operator)
    with pytest.raises(NotFound) as other:
        selectors.saga_get(actor=outsider, saga_id=saga.id)
    with pytest.raises(NotFound) as missing:
        selectors.saga_get(actor=outsider, saga_id="00000000-0000-0000-0000-000000000000")
    assert other.value.code == missing.value.code == "SAGA_NOT_FOUND"
    assert other.value.message.replace(str(saga.id), "X") == missing.value.message.replace(
        "00000000-0000-0000-0000-000000000000", "X"
    )
    with pytest.raises(NotFound):
        coordinator.saga_rollback(actor=outsider, saga_id=saga.id)


def test_list_sagas_is_tenant_scoped_newest_first_and_paginated(operator: Principal, outsider: Principal):
    ids = [coordinator.saga_begin(actor=operator).id for _ in range(5)]
    coordinator.saga_begin(actor=outsider)
    first = selectors.saga_list(actor=operator, limit=2)
    second = selectors.saga_list(actor=operator, limit=2, cursor=first.next_cursor)
    third = selectors.saga_list(actor=operator, limit=2, cursor=second.next_cursor)
    listed = [s.id for s in first.sagas + second.sagas + third.sagas]
    assert listed == list(reversed(ids))
    assert third.next_cursor is None
