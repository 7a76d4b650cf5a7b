"""Verifying and exporting many chains at hashing speed: one streaming pass ordered by (saga, sequence),
constant memory, no model instances.

Manifests record each chain's head (sequence and hash) at export time; comparing a later database with an
earlier manifest detects what a chain alone cannot: its newest rows deleted (truncation). Control-plane chains
(audit.control_plane) carry their head in a row of their own as well, so `verify_scope` catches their truncation
without a manifest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from audit.canonical import canonical_json
from audit.chain import HASHED_FIELDS, compute_hash
from audit.control_plane import is_control_plane
from audit.models import AuditEvent, ControlPlaneChain

# Rows per database round trip while streaming; bounds memory whatever the table size.
STREAM_CHUNK_ROWS = 5000
SAGA_CHAIN = "saga"
CONTROL_PLANE_CHAIN = "control-plane"
COLUMNS = ("saga_id", "sequence", "previous_hash", "event_hash", "created_at_text", "id", *HASHED_FIELDS[2:])


@dataclass
class ChainReport:
    saga_id: str  # the chain id: a saga's id, or a tenant's control-plane chain id
    tenant_id: str
    kind: str = SAGA_CHAIN
    events: int = 0
    head_sequence: int = 0
    head_hash: str | None = None
    failed_sequence: int | None = None
    reason: str = ""

    @property
    def valid(self) -> bool:
        return self.failed_sequence is None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "saga_id": self.saga_id,
            "chain_kind": self.kind,
            "tenant_id": self.tenant_id,
            "valid": self.valid,
            "events_checked": self.events,
            "head_sequence": self.head_sequence,
            "head_hash": self.head_hash,
        }
        if not self.valid:
            out.update(failed_sequence=self.failed_sequence, reason=self.reason)
        return out


@dataclass
class VerificationRun:
    chains: list[ChainReport] = field(default_factory=list)
    events: int = 0

    @property
    def broken(self) -> list[ChainReport]:
        return [c for c in self.chains if not c.valid]

    def count(self, kind: str) -> int:
        return sum(1 for c in self.chains if c.kind == kind)


def events_for(*, saga: str | None = None, tenant: str | None = None, since: datetime | None = None) -> QuerySet[Any]:
    query = AuditEvent.objects.all()
    if saga:
        query = query.filter(saga_id=saga)
    if tenant:
        query = query.filter(tenant_id=tenant)
    if since:
        # whole chains of the sagas that had any event since then (a chain is only verifiable from its start)
        recent = AuditEvent.objects.filter(created_at_text__gte=since.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
        query = query.filter(saga_id__in=recent.values("saga_id"))
    return query


def stream(query: QuerySet[Any]) -> Iterator[dict[str, Any]]:
    for row in query.order_by("saga_id", "sequence").values_list(*COLUMNS).iterator(chunk_size=STREAM_CHUNK_ROWS):
        yield dict(zip(COLUMNS, row, strict=True))


def _body(row: dict[str, Any]) -> dict[str, Any]:
    body = {name: row[name] for name in HASHED_FIELDS}
    body["id"], body["saga_id"], body["created_at"] = str(row["id"]), str(row["saga_id"]), row["created_at_text"]
    return body


def verify(query: QuerySet[Any], progress: Callable[[int], None] | None = None) -> VerificationRun:
    """Check every chain in `query` (whole chains: filter by saga or tenant, never by sequence)."""
    run = VerificationRun()
    current: ChainReport | None = None
    for row in stream(query):
        saga_id = str(row["saga_id"])
        if current is None or current.saga_id != saga_id:
            kind = CONTROL_PLANE_CHAIN if is_control_plane(saga_id, row["tenant_id"]) else SAGA_CHAIN
            current = ChainReport(saga_id, row["tenant_id"], kind)
            run.chains.append(current)
        run.events += 1
        if progress and run.events % STREAM_CHUNK_ROWS == 0:
            progress(run.events)
        if current.valid:
            _check(current, row)
    if progress:
        progress(run.events)
    return run


def _check(chain: ChainReport, row: dict[str, Any]) -> None:
    expected = chain.head_sequence + 1
    if row["sequence"] != expected:
        chain.failed_sequence, chain.reason = expected, f"sequence {expected} is missing (found {row['sequence']})"
    elif row["previous_hash"] != chain.head_hash:
        chain.failed_sequence, chain.reason = row["sequence"], "previous_hash does not link to the event before"
    elif compute_hash(chain.head_hash, _body(row)) != row["event_hash"]:
        chain.failed_sequence, chain.reason = row["sequence"], "the event's content does not match its hash"
    else:
        chain.head_sequence, chain.head_hash = row["sequence"], row["event_hash"]
        chain.events += 1


def verify_scope(
    *,
    saga: str | None = None,
    tenant: str | None = None,
    since: datetime | None = None,
    progress: Callable[[int], None] | None = None,
) -> VerificationRun:
    """Verify the chains in scope, then each control-plane chain against its head row."""
    # Heads are read before the events: an append committed in between only makes the chain longer than its head.
    heads = _heads(saga=saga, tenant=tenant)
    run = verify(events_for(saga=saga, tenant=tenant, since=since), progress)
    check_heads(run, heads, whole_scope=since is None)
    return run


def _heads(*, saga: str | None, tenant: str | None) -> list[ControlPlaneChain]:
    query = ControlPlaneChain.objects.all()
    if saga:
        query = query.filter(chain_id=saga)
    if tenant:
        query = query.filter(tenant_id=tenant)
    return list(query)


def check_heads(run: VerificationRun, heads: list[ControlPlaneChain], *, whole_scope: bool) -> None:
    """Each control-plane chain must still hold the event its head row names; each must have a head row.

    `whole_scope`: every chain of the scope was verified (no --since), so a head whose events are all gone is one.
    """
    reports = {c.saga_id: c for c in run.chains}
    for head in heads:
        report = reports.get(str(head.chain_id))
        if report is None:
            if not whole_scope or head.head_sequence == 0:
                continue
            report = ChainReport(str(head.chain_id), head.tenant_id, CONTROL_PLANE_CHAIN)
            run.chains.append(report)
        if report.valid and not _holds_head(report, head):
            short = report.head_sequence < head.head_sequence
            report.failed_sequence = report.head_sequence + 1 if short else head.head_sequence
            report.reason = (
                f"truncated: its head row records {head.head_sequence} events, {report.head_sequence} remain"
                if short
                else f"rewritten: event {head.head_sequence} no longer has the hash its head row recorded "
                f"({(head.head_hash or '')[:12]}...)"
            )
    named = {str(head.chain_id) for head in heads}
    unnamed = [c for c in run.chains if c.kind == CONTROL_PLANE_CHAIN and c.valid and c.saga_id not in named]
    for report in unnamed:
        # A head created after the snapshot (a tenant's first change, meanwhile) is not a missing one.
        if not ControlPlaneChain.objects.filter(chain_id=report.saga_id).exists():
            report.failed_sequence = report.head_sequence
            report.reason = "its head row (audit_controlplanechain) is missing: it was deleted"


def _holds_head(report: ChainReport, head: ControlPlaneChain) -> bool:
    if head.head_sequence == 0:
        return True  # nothing was recorded when the head was read; events since then only extend the chain
    if report.head_sequence < head.head_sequence:
        return False
    if report.head_sequence == head.head_sequence:
        return report.head_hash == head.head_hash
    return _has_head(report.saga_id, {"head_sequence": head.head_sequence, "head_hash": head.head_hash})


def manifest(run: VerificationRun, generated_at: str) -> dict[str, Any]:
    """Head hashes of every verified chain, with a digest over the whole list (store it in WORM storage)."""
    heads = {
        c.saga_id: {"tenant_id": c.tenant_id, "head_sequence": c.head_sequence, "head_hash": c.head_hash}
        for c in run.chains
        if c.valid
    }
    document = {"format": "semantic-saga-audit-manifest/1", "generated_at": generated_at, "sagas": heads}
    document["manifest_sha256"] = hashlib.sha256(canonical_json(document)).hexdigest()
    return document


def compare(run: VerificationRun, earlier: dict[str, Any]) -> list[ChainReport]:
    """Chains that no longer contain the head an earlier manifest recorded (truncated or rewritten)."""
    if (
        earlier.get("manifest_sha256")
        != hashlib.sha256(canonical_json({k: v for k, v in earlier.items() if k != "manifest_sha256"})).hexdigest()
    ):
        raise ValueError("the manifest's manifest_sha256 does not match its content: it was edited")
    now = {c.saga_id: c for c in run.chains}
    problems = []
    for saga_id, head in earlier.get("sagas", {}).items():
        chain = now.get(saga_id) or ChainReport(saga_id, head.get("tenant_id", ""))
        if not chain.valid:
            continue  # already reported as broken
        if chain.head_sequence < head["head_sequence"]:
            chain.failed_sequence = chain.head_sequence + 1
            chain.reason = (
                f"truncated: the manifest recorded {head['head_sequence']} events, {chain.head_sequence} remain"
            )
        elif not _has_head(saga_id, head):
            chain.failed_sequence = head["head_sequence"]
            chain.reason = "the event the manifest recorded as head was rewritten"
        else:
            continue
        problems.append(chain)
    return problems


def _has_head(saga_id: str, head: dict[str, Any]) -> bool:
    return AuditEvent.objects.filter(
        saga_id=saga_id, sequence=head["head_sequence"], event_hash=head["head_hash"]
    ).exists()


def export_lines(query: QuerySet[Any]) -> Iterator[str]:
    """JSON Lines: one stored event per line, exactly the fields that are hashed plus chain links."""
    for row in stream(query):
        record = {
            **_body(row),
            "sequence": row["sequence"],
            "previous_hash": row["previous_hash"],
            "event_hash": row["event_hash"],
        }
        yield json.dumps(record, ensure_ascii=False, sort_keys=True)
