"""The chaos suite's invariants, read from the database (Django ORM, this process) and the sink's record.

Each check returns violations: one line each, naming the saga or step and what was seen, so a failed run says
what to look at. `duplicates_now` is the cheap one the harness also runs while faults are being injected.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from bench.chaos_faults import Pause
from bench.chaos_sink import Delivery

TERMINAL = {"COMMITTED", "ROLLED_BACK", "ROLLBACK_FAILED", "RECOVERY_REQUIRED"}
AFTER_COMPLETION = {"COMPLETED", "COMPENSATING", "COMPENSATED", "COMPENSATION_FAILED"}


def duplicates_now() -> list[str]:
    """No step COMPLETED twice: one STEP_COMPLETED event per step, and one step row per node."""
    from django.db.models import Count

    from audit.models import AuditEvent
    from sagas.models import Step

    twice = (
        AuditEvent.objects.filter(event_type="STEP_COMPLETED")
        .values("saga_id", "step_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
    )
    out = [f"step {r['step_id']} of saga {r['saga_id']} COMPLETED {r['n']} times" for r in twice]
    shared = Step.objects.filter(node__isnull=False).values("node_id").annotate(n=Count("id")).filter(n__gt=1)
    out += [f"node {r['node_id']} has {r['n']} step rows (one attempt ran under two identities)" for r in shared]
    return out


def settled() -> list[str]:
    """Every saga with work planned is terminal, RECOVERY_REQUIRED shows why, and nothing is left in flight."""
    from django.utils import timezone

    from sagas.models import Node, Saga

    out: list[str] = []
    for saga in Saga.objects.filter(nodes__isnull=False).distinct().prefetch_related("nodes"):
        nodes = list(saga.nodes.all())
        states = ",".join(sorted(f"{n.key}={n.status}" for n in nodes))
        if saga.status not in TERMINAL:
            out.append(f"saga {saga.id} is {saga.status}, not terminal [{states}]")
        elif saga.status == "RECOVERY_REQUIRED" and not any(n.uncertain_outcome or n.error for n in nodes):
            out.append(f"saga {saga.id} is RECOVERY_REQUIRED but no node says why [{states}]")
    now = timezone.now()
    for node in Node.objects.filter(status="EXECUTING", lease_expires_at__lt=now):
        out.append(f"node {node.id} of saga {node.saga_id} EXECUTING past its lease ({node.lease_expires_at})")
    for node in Node.objects.filter(status="READY", saga__status="ACTIVE"):
        out.append(f"node {node.id} of saga {node.saga_id} READY with nobody to run it")
    return out


def sink_record(deliveries: list[Delivery], policies: dict[str, dict[str, Any]]) -> list[str]:
    """Each key has one effect (one body); forward keys within the attempts allowed; rollback keys within the
    compensation attempts of each rollback run; every answered effect is COMPLETED (or compensated) or uncertain;
    no step is COMPLETED without an effect at the sink."""
    from audit.models import AuditEvent
    from sagas.models import Step

    out: list[str] = []
    by_key: dict[str, list[Delivery]] = defaultdict(list)
    for delivery in deliveries:
        by_key[delivery.key].append(delivery)
    steps = {str(s.id): s for s in Step.objects.all()}
    runs = Counter(
        str(e["saga_id"])
        for e in AuditEvent.objects.filter(event_type__in=["ROLLBACK_STARTED", "ROLLBACK_RESUMED"]).values("saga_id")
    )
    for key, seen in by_key.items():
        if not key:
            out.append(f"{len(seen)} request(s) to {seen[0].path} without an Idempotency-Key")
            continue
        digests = {d.digest for d in seen if d.fault != "incomplete"}
        if len(digests) > 1:
            out.append(f"key {key} carried {len(digests)} different requests (two effects)")
        step_id, _, suffix = key.partition(":")
        step = steps.get(step_id)
        if step is None:
            out.append(f"key {key} reached the sink but no step {step_id} exists")
            continue
        policy = policies[step.action]
        if suffix == "rollback":
            allowed = int(policy["compensation"]) * max(1, runs[str(step.saga_id)])
            if len(seen) > allowed:
                out.append(f"rollback key {key} delivered {len(seen)} times, at most {allowed} allowed")
            continue
        if len(seen) > int(policy["forward"]):
            out.append(f"key {key} ({step.action}) delivered {len(seen)} times, max_attempts {policy['forward']}")
        answered = any(d.answered and d.status == 200 for d in seen)
        if answered and step.status not in AFTER_COMPLETION and not step.uncertain_outcome:
            out.append(f"step {key} of saga {step.saga_id} got its answer but is {step.status} (a lost completion)")
    for step_id, step in steps.items():
        if step.status in AFTER_COMPLETION and step_id not in by_key:
            out.append(f"step {step_id} of saga {step.saga_id} is {step.status} but never reached the sink")
    return out


OUTCOMES = {"STEP_COMPLETED", "STEP_FAILED", "STEP_ATTEMPT_FAILED", "STEP_RETRY_SCHEDULED"}


def late_writes() -> list[str]:
    """A fenced-off attempt's outcome is never applied: after the sweep fences a node (NODE_RECOVERED), the next
    outcome recorded for it must come from a new claim (STEP_STARTED), never from the lost worker."""
    from audit.models import AuditEvent

    out: list[str] = []
    fenced: set[str] = set()
    events = AuditEvent.objects.exclude(node_id="").order_by("saga_id", "sequence")
    for event in events.only("saga_id", "node_id", "event_type", "sequence").iterator(chunk_size=5000):
        if event.event_type == "NODE_RECOVERED":
            fenced.add(event.node_id)
        elif event.event_type == "STEP_STARTED":
            fenced.discard(event.node_id)
        elif event.event_type in OUTCOMES and event.node_id in fenced:
            out.append(
                f"node {event.node_id} of saga {event.saga_id}: {event.event_type} (sequence {event.sequence}) "
                "was recorded after the node was fenced off and before any new claim"
            )
    return out


def fenced_writes(pauses: list[Pause]) -> tuple[int, int, list[str]]:
    """Attempts fenced off while their worker was frozen, and how many of the woken workers' late writes were
    refused with STALE_WRITE_REFUSED. One that is not audited is listed (its worker may have lost its database
    connection or its process to another fault first, so it never wrote): evidence to read, not a violation;
    late_writes() is the invariant that no such write was ever applied."""
    from audit.models import AuditEvent
    from sagas.models import Node

    fenced = audited = 0
    unconfirmed: list[str] = []
    for pause in pauses:
        for node_id, fence in pause.held:
            node = Node.objects.filter(pk=node_id).first()
            if node is None or node.fence_token <= fence:
                continue  # the lease keeper renewed it after SIGCONT before the sweep came: not fenced off
            fenced += 1
            refusals = AuditEvent.objects.filter(event_type="STALE_WRITE_REFUSED", node_id=node_id)
            if any(int(e.data.get("fence_token", -1)) == fence for e in refusals):
                audited += 1
            else:
                unconfirmed.append(
                    f"node {node_id} of saga {node.saga_id}: fenced off ({fence} -> {node.fence_token}) while "
                    f"{pause.worker} was frozen ({pause.stopped_at:.3f}-{pause.resumed_at:.3f}); no refusal audited"
                )
    return fenced, audited, unconfirmed


def audit_chains() -> tuple[int, list[str]]:
    from audit.chain import verify_chain
    from sagas.models import Saga

    out: list[str] = []
    ids = list(Saga.objects.values_list("id", flat=True))
    for saga_id in ids:
        result = verify_chain(saga_id)
        if not result.valid:
            out.append(f"audit chain of saga {saga_id} fails at sequence {result.failed_sequence}: {result.reason}")
    return len(ids), out
