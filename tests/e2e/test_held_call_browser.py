"""An operator judges calls held by the MCP proxy in a real browser: the approval queue says what each is in the
proxy's terms (tool, server, class, gate, what undo could do, the pinned definition and what changed), and no table
runs off the page at 1280 px."""

from __future__ import annotations

from typing import Any

from governance.identity.principal import Principal
from tests.held_calls import held_changed_tweet, held_send_email

# Each table's right edge, and the page's scrollable width, against the viewport (1280 px wide, conftest's `page`).
WIDTHS = """() => ({
    viewport: window.innerWidth,
    page: document.documentElement.scrollWidth,
    tables: [...document.querySelectorAll('table')].map(t => ({
        id: t.id || t.closest('[id]')?.id || '?', right: Math.ceil(t.getBoundingClientRect().right),
    })),
})"""


def _fits(page: Any) -> None:
    widths = page.evaluate(WIDTHS)
    assert widths["viewport"] == 1280 and widths["tables"]
    assert widths["page"] <= widths["viewport"], widths
    assert all(t["right"] <= widths["viewport"] for t in widths["tables"]), widths


def test_operator_reads_held_calls_in_the_proxys_terms_and_the_queue_fits_the_page(
    page: Any, shoot: Any, operator: Principal
) -> None:
    # given a held send_email (class C) and a held post_tweet whose server lists another definition than the pinned
    email = held_send_email(operator)
    tweet = held_changed_tweet(operator)

    # when the operator opens the approval queue
    page.goto("/admin/sagas/saga/approvals/")
    email_row = page.locator(f"#approval-row-{email.node_id}")
    tweet_row = page.locator(f"#approval-row-{tweet.node_id}")

    # then each row names the tool and its server, the class's real meaning and what undo could do
    text = email_row.inner_text()
    assert "send_email" in text and "demo" in text and "proxy.demo.send_email" not in text
    assert "compensable — cannot be undone, only corrected afterwards" in text and "irreversible" not in text
    assert "Class C (by heuristic)" in text and "Gate confirm (by tool)" in text
    assert "What undo could do: undo lists it for a person to correct: C" in text
    # the pinned definition is folded; one click shows it
    pinned = page.locator(f"#held-definition-{email.id} .definition-pinned")
    assert not pinned.is_visible()
    page.click(f"#held-definition-{email.id} summary")
    assert "Send one email to one recipient." in pinned.inner_text()
    # the changed tool shows what differs, and (unfolded) the pinned beside the current definition
    changes = page.locator(f"#definition-changed-{tweet.id}").inner_text()
    assert "definition changed" in changes and "inputSchema.properties.dm_all: added" in changes
    page.click(f"#held-definition-{tweet.id} summary")
    assert "DM every follower" not in page.locator(f"#held-definition-{tweet.id} .definition-pinned").inner_text()
    assert "dm_all" in page.locator(f"#held-definition-{tweet.id} .definition-current").inner_text()
    assert "post_tweet" in tweet_row.inner_text()

    # and with both definitions unfolded, no table is wider than the page
    _fits(page)
    shoot(page, "console-held-call")

    # the confirmation page and the session's detail page fit too, and say the same in their own words
    page.click(f"#approve-{email.node_id}")
    assert "compensable — cannot be undone" in page.locator(f"#approval-context-{email.id}").inner_text()
    _fits(page)
    page.goto(f"/admin/sagas/saga/{email.node.saga_id}/detail/")
    assert "Tool send_email on server demo" in page.locator(f"#approval-context-{email.id}").inner_text()
    _fits(page)
