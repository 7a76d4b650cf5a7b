"""A proxy session's audit chain, link by link, as `semantic-saga verify` shows it (Sagaz's `verify`).

Every event of the session's saga is a link: `event_hash = sha256(previous_hash, event)` (docs/audit_hash.md). The
hashes are recomputed by audit.chain.verify_events, the same code as `verify_audit` and the console's check; this
module only keeps the links it walked, to show them, and then checks the chain's end against the head the session's
row records (Saga.audit_sequence / audit_head_hash, written in the same transaction as each event), which a chain
alone cannot do: its newest events deleted leave a shorter chain that still verifies.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from audit.chain import iter_events, verify_events
from audit.models import AuditEvent
from governance.identity.principal import Principal
from governance.identity.rbac import READ, authorize
from sagas.models import Saga


@dataclass(frozen=True)
class ChainLink:
    sequence: int
    event_type: str
    tool: str  # the proxied call's tool (server/tool) for a call's events; "" for the session's own
    step_id: str
    previous_hash: str  # "" for the first link (the chain's genesis)
    event_hash: str

    def as_json(self) -> dict[str, Any]:
        return {
            "seq": self.sequence,
            "event": self.event_type,
            "tool": self.tool,
            "step_id": self.step_id,
            "prev_hash": self.previous_hash,
            "hash": self.event_hash,
        }


@dataclass(frozen=True)
class ChainWalk:
    """The links verified in order; when the chain is broken, `broken` names where and why (the walk stops there,
    as a hash chain cannot vouch for anything after its first break)."""

    saga_id: str
    verified: list[ChainLink]
    failed_sequence: int | None = None
    reason: str = ""
    broken: ChainLink | None = None  # the link found where the chain broke, when there is one to show

    @property
    def valid(self) -> bool:
        return self.failed_sequence is None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "session": self.saga_id,
            "valid": self.valid,
            "links_verified": len(self.verified),
            "links": [link.as_json() for link in self.verified],
        }
        if not self.valid:
            out.update(failed_sequence=self.failed_sequence, reason=self.reason)
            out["broken_link"] = self.broken.as_json() if self.broken else None
        return out


def session_chain(*, actor: Principal, saga: Saga) -> ChainWalk:
    """Verify the session's chain, keeping each link walked; then check its end against the session row's head."""
    authorize(actor, READ, "verify_audit")
    # The head is read before the events: an event appended in between only makes the chain longer than the head.
    head_sequence, head_hash = Saga.objects.filter(pk=saga.pk).values_list("audit_sequence", "audit_head_hash").get()
    walked: list[ChainLink] = []  # what is shown of each event, not the event: memory stays small per link

    def kept() -> Iterator[AuditEvent]:
        for event in iter_events(saga.id):
            walked.append(_link(event))
            yield event

    result = verify_events(str(saga.id), kept())
    if not result.valid:
        failed = result.failed_sequence or 0
        good = [link for link in walked if link.sequence < failed]
        last = walked[-1] if walked and walked[-1].sequence >= failed else None
        return ChainWalk(str(saga.id), good, result.failed_sequence, result.reason, last)
    return _against_head(ChainWalk(str(saga.id), walked), head_sequence, head_hash)


def _against_head(walk: ChainWalk, head_sequence: int, head_hash: str) -> ChainWalk:
    count = len(walk.verified)
    if head_sequence == 0 or not head_hash:
        return walk
    if count < head_sequence:
        reason = (
            f"the chain ends at seq {count} but the session records {head_sequence} events: the newest "
            f"{head_sequence - count} were deleted"
        )
        return ChainWalk(walk.saga_id, walk.verified, count + 1, reason)
    at_head = walk.verified[head_sequence - 1]
    if at_head.event_hash != head_hash:
        reason = f"seq {head_sequence} no longer has the hash the session recorded ({head_hash[:12]}...): rewritten"
        return ChainWalk(walk.saga_id, walk.verified[: head_sequence - 1], head_sequence, reason, at_head)
    return walk


def _link(event: AuditEvent) -> ChainLink:
    server, _, tool = event.action.removeprefix("proxy.").partition(".")
    named = f"{server}/{tool}" if event.action.startswith("proxy.") and tool else event.action
    return ChainLink(
        sequence=event.sequence,
        event_type=event.event_type,
        tool=named,
        step_id=event.step_id or event.node_id,
        previous_hash=event.previous_hash or "",
        event_hash=event.event_hash,
    )
