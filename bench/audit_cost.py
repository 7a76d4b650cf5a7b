"""What the hash chain costs per step, measured without touching production code.

There is no switch to turn the chain off, and the harness does not patch the coordinator. So the "chain on vs
off" figure is an estimate: the time the chain's own computation takes per event (canonical JSON + SHA-256,
through audit.chain's functions, on the real events the chained sagas of this run wrote), times the events a
chained node writes, as a fraction of the measured per-step time. It leaves out the head read and the event
INSERT (I/O the journal needs anyway); it is a lower bound on the chain's share, not a measured on/off ratio.
Also: verify_audit throughput over N events (bench/audit_verify.py), written once per N and kept.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from typing import Any

from bench.audit_verify import populate, verify_tenant


def _timed(fn: Any, items: list[Any], min_seconds: float = 0.2) -> float:
    """Seconds per item of fn(item), repeating the whole list until at least min_seconds passed."""
    loops = 0
    started = time.perf_counter()
    while True:
        for item in items:
            fn(item)
        loops += 1
        elapsed = time.perf_counter() - started
        if elapsed >= min_seconds:
            return elapsed / (loops * len(items))


def chain_cost(saga_ids: list[uuid.UUID]) -> dict[str, Any]:
    from audit.canonical import canonical_json
    from audit.chain import compute_hash, event_body
    from audit.models import AuditEvent
    from sagas.models import Node

    events = list(AuditEvent.objects.filter(saga_id__in=saga_ids).order_by("saga_id", "sequence"))
    nodes = Node.objects.filter(saga_id__in=saga_ids).count()
    # Events written while running (after each saga's RUN_REQUESTED), not while planning.
    run_started: dict[uuid.UUID, int] = {}
    for event in events:
        if event.event_type == "RUN_REQUESTED":
            run_started.setdefault(event.saga_id, event.sequence)
    during_run = [e for e in events if e.sequence > run_started.get(e.saga_id, 1 << 62)]
    if not during_run or not nodes:
        raise RuntimeError("no events of a chained run to measure")
    pairs = [(e.previous_hash, event_body(e)) for e in during_run]
    bodies = [{"previous_hash": p, "event": b} for p, b in pairs]
    encoded = [canonical_json(b) for b in bodies]
    # What append does per event beyond building the row: the hashed body, then the link hash.
    per_event = _timed(lambda e: compute_hash(e.previous_hash, event_body(e)), during_run)
    return {
        "events_per_node": len(during_run) / nodes,
        "event_types_per_node": sorted({e.event_type for e in during_run}),
        "chain_seconds_per_event": per_event,
        "body_seconds_per_event": _timed(event_body, during_run),
        "hash_seconds_per_event": _timed(lambda pb: compute_hash(pb[0], pb[1]), pairs),
        "canonical_json_seconds_per_event": _timed(canonical_json, bodies),
        "sha256_seconds_per_event": _timed(lambda raw: hashlib.sha256(raw).hexdigest(), encoded),
        "mean_canonical_bytes": sum(len(r) for r in encoded) / len(encoded),
    }


def verify_throughput(events: int, sagas: int = 100) -> dict[str, Any]:
    from audit.models import AuditEvent

    tenant = f"bench-verify-{events}"
    expected = events - events % sagas
    if AuditEvent.objects.filter(tenant_id=tenant).count() != expected:
        AuditEvent.objects.filter(tenant_id=tenant).delete()
        populate(events, sagas, tenant=tenant)
    chains, checked, seconds = verify_tenant(tenant)
    return {"events": checked, "chains": chains, "seconds": seconds, "events_per_second": checked / seconds}
