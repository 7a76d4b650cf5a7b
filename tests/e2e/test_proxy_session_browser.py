"""An operator works a proxy session in a real browser, without a terminal: finds it among the proxy sessions, reads
its calls in the ledger's terms, approves its held send_email, reads the undo plan (the same words as
`semantic-saga undo --dry-run`), is refused a forced undo without a reason, then undoes it. The session is a real
one: the official mcp client through the journaled proxy, configured as examples/proxy.json is (the demo pack,
send_email held for a person), against the demo world over Streamable HTTP."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from django.db import connections
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from sagas.models import Node, Saga
from sagas.protocols.proxy.runtime import journaled
from tests.proxy.agent import text
from tests.proxy.demo_session import command, demo_config, two_contacts, world
from tests.proxy.harness import HttpDownstream, serve_proxy

pytestmark = pytest.mark.django_db(transaction=True)
# examples/proxy.json's policy: an email waits for a person before it goes.
HOLD_EMAIL = {"tools": [{"tool": "send_email", "server": "demo", "action": "confirm", "reason": "it cannot be unsent"}]}
EMAIL = {"to": "ada@example.com", "subject": "Welcome", "body": "Hi Ada"}
CLIENT = "claude-code-e2e"
WAIT_MS = 30_000
MODEL_LISTS = ["saga", "step", "node", "approval", "checkpoint"]


def _no_table_wider_than_the_page(page: Any) -> None:
    # past the page's edge, or past the edge of the box it scrolls in (Django's lists scroll inside `.results`)
    wide = page.evaluate(
        """() => [...document.querySelectorAll('#content table')]
            .filter(t => {
                const box = t.closest('.results');
                return t.getBoundingClientRect().right > window.innerWidth + 1
                    || (box !== null && t.scrollWidth > box.clientWidth + 1);
            })
            .map(t => t.id || t.className || 'a table')"""
    )
    assert wide == [], f"{page.url}: tables past the right edge at {page.viewport_size['width']} px: {wide}"
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]


class Agent(threading.Thread):
    """The agent's session in a thread of its own: two calls, then the email, which waits for the operator."""

    def __init__(self, url: str) -> None:
        super().__init__(name="agent", daemon=True)
        self.url = url
        self.answers: list[tuple[bool, str]] = []

    def run(self) -> None:
        try:
            anyio.run(self._session)
        finally:
            connections.close_all()

    async def _session(self) -> None:
        # named, as an operator finds a session by its client
        me = Implementation(name=CLIENT, version="1.0")
        async with Client(streamable_http_client(self.url), mode="legacy", client_info=me) as client:
            for tool, arguments in [
                ("list_contacts", {}),
                ("create_contact", {"name": "Ada", "email": "ada@example.com"}),
                ("send_email", EMAIL),
            ]:
                answer = await client.call_tool(tool, arguments)
                self.answers.append((answer.is_error, text(answer)))


def test_an_operator_finds_a_session_approves_its_held_call_and_undoes_it(
    page: Any, shoot: Any, tmp_path: Path, demo_http: HttpDownstream, settings: Any
) -> None:
    settings.SAGA_DEFAULT_TENANT = "acme"
    before = _off_the_browsers_loop(two_contacts, demo_http)
    with serve_proxy(demo_config(tmp_path, demo_http, policy=HOLD_EMAIL), call_path=journaled) as served:
        agent = Agent(served.url)
        agent.start()
        held = _wait_for(lambda: Node.objects.filter(key__startswith="proxy-call-", status="WAITING_APPROVAL").first())
        session = Saga.objects.get(kind="proxy_session")

        # the sessions screen: found by its client, a held call waiting
        page.goto("/admin/")
        page.click("#nav-proxy-sessions")
        row = page.locator(f"#session-{session.id}")
        assert "1 waiting" in row.inner_text() and "ACTIVE" in row.inner_text() and CLIENT in row.inner_text()
        _no_table_wider_than_the_page(page)
        shoot(page, "console-proxy-sessions")

        # the session page, in the ledger's terms
        row.locator(f"#open-{session.id}").click()
        assert page.inner_text("#chain-verdict").startswith("OK")
        create = page.locator("#session-ledger tbody tr", has_text="create_contact")
        assert "R" in create.inner_text() and "pack" in create.inner_text() and "delete_contact" in create.inner_text()
        email = page.locator(f"#call-{held.id}")
        assert "held" in email.inner_text() and "C" in email.inner_text()
        email.locator(".call-arguments summary").click()
        assert '"subject": "Welcome"' in email.locator(".call-arguments pre").inner_text()
        _no_table_wider_than_the_page(page)
        shoot(page, "console-proxy-session")

        # approve the held email from the session page (the decide page runs ready nodes by default: the proxy
        # alone sends a held call, so it must reach the world once)
        page.click(f"#approve-{held.id}")
        page.fill("#id_reason", "checked the wording")
        page.click("#confirm-approve")
        agent.join(timeout=WAIT_MS / 1000)
        assert not agent.is_alive() and [failed for failed, _ in agent.answers] == [False, False, False]
    assert len(world(demo_http)["outbox"]) == 1

    # the undo's dry run: the same words as the terminal's
    page.goto(f"/admin/sagas/saga/{session.id}/session/")
    page.click("#session-undo")
    printed = _off_the_browsers_loop(command, "undo", str(session.id), "--dry-run").splitlines()
    assert page.inner_text("#undo-heading") == printed[0]
    assert page.inner_text("#undo-summary") == "\n".join(printed[-2:])
    assert printed[-1] == "the undo would leave 1 call(s): send_email (needs a decision)"
    verdicts = page.locator("#undo-items tbody tr").evaluate_all("rows => rows.map(r => r.dataset.verdict)")
    assert verdicts == ["needs_decision", "would_undo", "skipped"]
    _no_table_wider_than_the_page(page)
    shoot(page, "console-proxy-undo")

    # the forced plan, confirmed without a reason, is refused, and nothing changed
    page.check("#undo-force")
    page.click("#undo-show")
    page.check("#undo-confirm")
    page.click("#undo-submit")
    assert "needs a reason" in page.inner_text(".messagelist")
    session.refresh_from_db()
    assert session.status == "ACTIVE"

    # the plain plan, confirmed: the contact the agent made is gone, the email is listed for a person
    page.uncheck("#undo-force")
    page.click("#undo-show")
    page.check("#undo-confirm")
    page.click("#undo-submit")
    left = "undone, 1 call left: send_email (needs a decision)"
    assert f"the session is {left}" in page.inner_text("#undo-summary")
    assert left in page.inner_text(".messagelist .warning")  # calls left is said, never as an error
    done = page.locator("#undo-items tbody tr").evaluate_all("rows => rows.map(r => r.dataset.verdict)")
    assert done == ["needs_decision", "undone", "skipped"]
    assert world(demo_http)["contacts"] == before["contacts"]
    page.click("#undo-back")
    assert page.inner_text("#session-state") == "undone, calls left"
    assert page.inner_text("#session-undo-outcome") == left
    assert "undone" in page.locator("#session-ledger tbody tr", has_text="create_contact").inner_text()
    shown = page.inner_text("#content")
    for internal in ("declared_compensation", "ROLLBACK_REQUESTED", "needs_decision", "no_way_back", "Error"):
        assert internal not in shown, f"the session page shows {internal!r}"
    page.click("#nav-proxy-sessions")
    assert "undone, calls left" in page.locator(f"#session-{session.id}").inner_text()

    # and the console's lists of what the session left fit a 1280 px screen too
    for path in ["/admin/", *(f"/admin/sagas/{model}/" for model in MODEL_LISTS), "/admin/audit/auditevent/"]:
        page.goto(path)
        _no_table_wider_than_the_page(page)


def _off_the_browsers_loop(work: Callable[..., Any], *args: Any) -> Any:
    """Run `work` in a thread: Playwright's sync API keeps an event loop running in this one, and the MCP client
    (the demo world's set-up, an undo's drift reads) runs one of its own."""
    done: list[Any] = []

    def run() -> None:
        try:
            done.append(work(*args))
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=WAIT_MS / 1000)
    assert done, f"{work.__name__} did not finish"
    return done[0]


def _wait_for(find: Any) -> Any:
    deadline = time.monotonic() + WAIT_MS / 1000
    while (found := find()) is None:
        assert time.monotonic() < deadline, "the held call did not appear"
        time.sleep(0.1)
    return found
