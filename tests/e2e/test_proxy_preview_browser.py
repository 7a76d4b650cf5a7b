"""The console's preview report of a proxy session run dry, in a real browser: the calls by Sagaz class, each with a
bar of the gates it would have met (the screenshot docs/console.md shows: `make screenshots`)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.proxy.preview_session import dry_proxy_session

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_operator_sees_a_dry_session_by_class_with_its_gate_bars(page: Any, shoot: Any) -> None:
    session = dry_proxy_session()
    page.goto(f"/admin/sagas/saga/{session.id}/preview/")
    assert "2 read(s) executed, 6 call(s) recorded dry" in page.inner_text("#preview-summary-text")
    classes = page.locator("#preview-classes tbody tr")
    assert [row.get_attribute("id") for row in classes.all()] == [
        "class-I",
        "class-unknown",
        "class-C",
        "class-R",
        "class-read",
    ]
    # the C row: one call allowed, one blocked, each half of the bar
    allow = page.locator("#class-C .gate-allow").bounding_box()
    block = page.locator("#class-C .gate-block").bounding_box()
    assert allow and block and allow["width"] > 0 and abs(allow["width"] - block["width"]) <= 1
    shoot(page, "console-proxy-preview")
