from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    """Coordinator tests commit for real: executor threads and subprocesses must see the rows."""
