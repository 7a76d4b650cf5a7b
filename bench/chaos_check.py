"""The chaos suite's invariants, read from the database (Django ORM, this process) and the sink's record.

Each check returns violations: one line each, naming the saga or step and what was seen, so a failed run says
what to look at. `duplicates_now` is the cheap one the harness also runs while faults are being injected.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from bench.chaos_downstream import TOOLS
from bench.chaos_faults import Pause
from bench.chaos_sink import Delivery

PROXIED = "proxy."  # the action id of a proxied call's step: proxy.<server>.<tool>
TERMINAL = {"COMMITTED", "ROLLED_BACK", "ROLLBACK_FAILED", "RECOVERY_REQUIRED"}
# The downstream's reads: the proxy journals them behind their answers (docs/proxy.md), so a kill can lose their steps.
READ_TOOLS = {t.name for t in TOOLS if t.annotations is not None and t.annotations.read_only_hint}
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


OVERDUE_SQL = """
    SELECT 'node', id::text, saga_id::text, EXTRACT(EPOCH FROM now() - lease_expires_at), lease_owner,
           fence_token, lease_expires_at FROM sagas_node
     WHERE status = 'EXECUTING' AND lease_expires_at < now()
    UNION ALL
    SELECT 'step', id::text, saga_id::text, EXTRACT(EPOCH FROM now() - lease_expires_at), lease_owner,
           fence_token, lease_expires_at FROM sagas_step
     WHERE status = 'EXECUTING' AND node_id IS NULL AND lease_expires_at < now()
    UNION ALL
    SELECT 'held call', id::text, saga_id::text, EXTRACT(EPOCH FROM now() - lease_expires_at), lease_owner,
           fence_token, lease_expires_at FROM sagas_node
     WHERE status IN ('WAITING_APPROVAL', 'READY') AND step_id IS NULL AND lease_owner <> ''
       AND lease_expires_at < now()
"""


def overdue_leases(grace: float) -> tuple[float, list[str]]:
    """Attempts still EXECUTING after their lease ran out, which the recovery sweep has not yet made visible
    (retried, failed as uncertain, fenced off): the longest such wait seen now (database clock), and one line
    per attempt waiting longer than `grace` (one sweep interval and a pass's own time on a loaded machine)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(OVERDUE_SQL)
        rows = cursor.fetchall()
    longest = max((float(r[3]) for r in rows), default=0.0)
    late = [
        f"{kind} {item} of saga {saga} still EXECUTING {float(waited):.1f}s after its lease ran out "
        f"(owner {owner}, fence {fence}, lease to {expires.isoformat()})"
        for kind, item, saga, waited, owner, fence, expires in rows
        if float(waited) > grace
    ]
    return longest, late


def held_calls(kills: list[tuple[str, str]], calls: list[dict[str, Any]]) -> list[str]:
    """A call held for a person whose proxy was killed is withdrawn (REFUSED, nothing sent), never left waiting
    or sent; the downstream never saw the held tool."""
    from sagas.models import Node

    out = [f"the held tool reached the downstream: {call}" for call in calls if call.get("tool") == "chaos_hold"]
    for saga_id, node_id in kills:
        node = Node.objects.filter(pk=node_id).select_related("step").first()
        if node is None:
            out.append(f"held call {node_id} of saga {saga_id} is gone")
        elif node.step is None or node.step.status != "REFUSED":
            step = node.step.status if node.step else "no step"
            out.append(f"held call {node_id} of saga {saga_id} is {node.status} ({step}) after its proxy was killed")
    return out


def worked_on() -> Any:
    """Sagas with work in them: a planned node, or a proxied call's step (a proxy session without a call, like
    a saga left empty by a repeated begin, holds nothing to settle)."""
    from django.db.models import Q

    from sagas.models import Saga

    return Saga.objects.filter(Q(nodes__isnull=False) | Q(steps__isnull=False)).distinct()


def settled() -> list[str]:
    """Every saga with work planned is terminal, RECOVERY_REQUIRED shows why, and nothing is left in flight."""
    from django.utils import timezone

    from sagas.models import Node, Step

    out: list[str] = []
    for saga in worked_on().prefetch_related("nodes", "steps"):
        nodes = [*saga.nodes.all(), *(s for s in saga.steps.all() if s.node_id is None)]  # a proxied call: a step
        states = ",".join(sorted(f"{getattr(n, 'key', n.id)}={n.status}" for n in nodes))
        if saga.status not in TERMINAL:
            out.append(f"saga {saga.id} is {saga.status}, not terminal [{states}]")
        elif saga.status == "RECOVERY_REQUIRED" and not any(n.uncertain_outcome or n.error for n in nodes):
            out.append(f"saga {saga.id} is RECOVERY_REQUIRED but nothing in it says why [{states}]")
    now = timezone.now()
    for node in Node.objects.filter(status="EXECUTING", lease_expires_at__lt=now):
        out.append(f"node {node.id} of saga {node.saga_id} EXECUTING past its lease ({node.lease_expires_at})")
    for step in Step.objects.filter(status="EXECUTING", node__isnull=True, lease_expires_at__lt=now):
        out.append(f"step {step.id} of saga {step.saga_id} ({step.action}) EXECUTING past its lease")
    for node in Node.objects.filter(status="READY", saga__status="ACTIVE"):
        out.append(f"node {node.id} of saga {node.saga_id} READY with nobody to run it")
    return out


@dataclass(frozen=True)
class Arrival:
    """One request that reached the world (the sink or the downstream MCP server), as the world recorded it."""

    key: str  # the idempotency key it carried: a step id, or `<step id>:rollback`
    request: str  # what it asked for (one per key: two would be two different effects); "" if it never arrived whole
    succeeded: bool  # the world answered success (the answer may still have been lost on its way back)
    where: str  # the path or tool, for the messages


def sink_arrivals(deliveries: list[Delivery]) -> list[Arrival]:
    return [
        Arrival(d.key, d.digest if d.fault != "incomplete" else "", d.answered and d.status == 200, d.path)
        for d in deliveries
    ]


def downstream_arrivals(calls: list[dict[str, Any]]) -> list[Arrival]:
    """The downstream answers every call it records with success (bench/chaos_downstream.py)."""
    return [Arrival(str(c["key"]), repr(sorted(c["args"].items())), True, str(c["tool"])) for c in calls]


def effects(arrivals: list[Arrival], proxied: bool, lost_reads: list[str] | None = None) -> list[str]:
    """The world's record against the journal, for the REST-driven steps (the sink) or the proxied calls (the
    downstream MCP server): each key carried one request (a read the proxy journals behind its answer may have no
    step if a proxy was killed right after answering it: docs/proxy.md says a crash can lose those lines; such keys
    go to `lost_reads` when it is given, and are violations when it is not); a forward key arrived at most
    `forward.max_attempts` times of the step's pinned snapshot (1 for a proxied call: never re-sent), a rollback
    key at most `compensation.max_attempts` per rollback run; every success the world answered is COMPLETED,
    compensating, compensated or visibly uncertain (never lost, never journaled as not sent); every step journaled
    as done (completed, not uncertain; then perhaps compensated) arrived."""
    from sagas.models import Step

    world = "the downstream" if proxied else "the sink"
    out: list[str] = []
    by_key: dict[str, list[Arrival]] = defaultdict(list)
    for arrival in arrivals:
        by_key[arrival.key].append(arrival)
    chosen = Step.objects.filter(action__startswith=PROXIED)
    steps = {str(s.id): s for s in (chosen if proxied else Step.objects.exclude(action__startswith=PROXIED))}
    runs = rollback_runs()
    for key, seen in by_key.items():
        if not key:
            out.append(f"{len(seen)} request(s) to {seen[0].where} reached {world} without an idempotency key")
            continue
        if len({a.request for a in seen if a.request}) > 1:
            out.append(f"key {key} carried different requests to {world} (two effects)")
        step_id, _, suffix = key.partition(":")
        step = steps.get(step_id)
        if step is None:
            if lost_reads is not None and all(a.where in READ_TOOLS for a in seen) and len(seen) == 1:
                lost_reads.append(key)
            else:
                out.append(f"key {key} reached {world} but no such step {step_id} exists")
            continue
        forward, compensation = _attempts(step.action_definition)
        if suffix == "rollback":
            allowed = compensation * max(1, runs[str(step.saga_id)])
            if len(seen) > allowed:
                out.append(f"rollback key {key} reached {world} {len(seen)} times, at most {allowed} allowed")
            continue
        if len(seen) > forward:
            out.append(f"key {key} ({step.action}) reached {world} {len(seen)} times, max_attempts {forward}")
        if any(a.succeeded for a in seen) and step.status not in AFTER_COMPLETION and not step.uncertain_outcome:
            code = (step.error or {}).get("code", "")
            out.append(f"step {key} of saga {step.saga_id} succeeded at {world} but is {step.status} {code}".rstrip())
    for step_id, step in steps.items():
        # A step whose outcome is unknown (its proxy or worker died with the call journaled and maybe not sent) may
        # never have arrived: rolling its session back still runs its compensation, which is safe either way.
        if step.status in AFTER_COMPLETION and step_id not in by_key and not step.uncertain_outcome:
            out.append(f"step {step_id} of saga {step.saga_id} is {step.status} but never reached {world}")
    return out


def _attempts(snapshot: dict[str, Any] | None) -> tuple[int, int]:
    policy = (snapshot or {}).get("execution_policy", {})
    forward = int(policy.get("forward", {}).get("max_attempts", 1))
    return forward, int(policy.get("compensation", {}).get("max_attempts", 1))


def rollback_runs() -> Counter[str]:
    """Rollback runs per saga (each may call a compensation up to its max_attempts)."""
    from audit.models import AuditEvent

    events = AuditEvent.objects.filter(event_type__in=["ROLLBACK_STARTED", "ROLLBACK_RESUMED"])
    return Counter(str(e["saga_id"]) for e in events.values("saga_id"))


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
