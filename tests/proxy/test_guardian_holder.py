"""A held call dies with its holder. The proxy process keeping the agent's request open is killed (SIGKILL) while a
call waits for a person; once its lease lapses, an operator's approve is refused saying nothing ran and why (or
the recovery sweep withdraws the call first, and the approve says so), the ledger shows the call withdrawn, and
nothing ever reaches the server. Over stdio (`semantic-saga proxy`) and over HTTP (`semantic-saga serve`)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio
import pytest
from django.utils import timezone

from sagas.coordinator import sagas_recover
from sagas.models import Node
from tests.proxy.guardian import TRANSPORTS, Guarded, guarded_proxy, held_node, poll, proxy_pid
from tests.proxy.terminal import at_terminal

pytestmark = pytest.mark.django_db(transaction=True)
LEASE = {"SAGA_LEASE_SECONDS": "3"}


def _kill_while_held(guarded: Guarded) -> Node:
    """The agent's purge_cache is held; its holder is killed; returns the node once its lease has lapsed."""

    async def scenario() -> Node:
        async with guarded.agent() as client, anyio.create_task_group() as group:

            async def call() -> None:
                with pytest.raises(Exception):  # noqa: B017 - the proxy dies under the call: any transport error
                    await client.call_tool("purge_cache", {"scope": "all"})

            group.start_soon(call)
            node = await anyio.to_thread.run_sync(held_node)
            os.kill(proxy_pid(guarded), signal.SIGKILL)
            group.cancel_scope.cancel()
        return node

    node = anyio.run(scenario)

    def lapsed() -> bool:
        held = Node.objects.get(pk=node.id)
        return held.lease_expires_at is not None and held.lease_expires_at <= timezone.now()

    poll(lapsed, "the held call's lease to lapse")
    return Node.objects.get(pk=node.id)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_approve_after_the_holder_died_is_refused_and_nothing_runs(transport: str, tmp_path: Path):
    with guarded_proxy(transport, tmp_path, env=LEASE) as guarded:
        node = _kill_while_held(guarded)
        approved = at_terminal("approve", str(node.id), "--by", "olga")

    assert approved.returncode != 0 and "HOLDER_GONE" in approved.stdout
    assert "nothing ran" in approved.stdout and "Nothing was sent" in approved.stdout
    node.refresh_from_db()
    assert node.status == "REJECTED" and node.step is not None
    assert node.step.status == "REFUSED" and node.step.error["code"] == "HOLDER_GONE"
    assert node.approvals.get().status == "REJECTED" and node.approvals.get().decided_by == "system:recovery"
    assert guarded.calls() == []
    ledger = at_terminal("ledger", "--json", answer="")
    assert '"status": "refused"' in ledger.stdout and "purge_cache" in ledger.stdout


def test_the_sweep_withdraws_a_call_whose_holder_died_and_a_later_approve_says_why(tmp_path: Path):
    with guarded_proxy("stdio", tmp_path, env=LEASE) as guarded:
        node = _kill_while_held(guarded)
        report = sagas_recover()
        approved = at_terminal("approve", str(node.id), "--by", "olga")

    assert report.held_calls_withdrawn == 1
    assert approved.returncode != 0 and "NODE_NOT_WAITING_APPROVAL" in approved.stdout
    assert "the proxy process holding it stopped before it was sent" in approved.stdout
    node.refresh_from_db()
    assert node.status == "REJECTED" and node.step.error["code"] == "HOLDER_GONE"
    assert guarded.calls() == []
