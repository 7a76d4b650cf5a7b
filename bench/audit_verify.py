"""How fast verify_audit checks chains: writes N real chained events (M sagas), then times a full verification.

Run: DATABASE_URL=postgresql://postgres@127.0.0.1:5432/bench .venv/bin/python bench/audit_verify.py --events 100000
(a migrated database; the events are appended through audit.chain.append exactly as the coordinator does).
bench/run.py reuses `populate` and `verify_tenant` on its own database (one tenant per event count, kept between
runs so the events are written once).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path

BATCH = 1000


def populate(events: int, sagas: int, tenant: str = "bench") -> list[uuid.UUID]:
    from django.db import transaction

    from audit.chain import EventDraft, append

    ids = [uuid.uuid4() for _ in range(sagas)]
    per_saga = events // sagas
    for saga_id in ids:
        for start in range(0, per_saga, BATCH):
            drafts = [
                EventDraft(
                    "STEP_COMPLETED",
                    "bench",
                    "service",
                    action="noop",
                    action_version="1.0.0",
                    status="COMPLETED",
                    data={"attempt": 1, "n": start + i},
                )
                for i in range(min(BATCH, per_saga - start))
            ]
            with transaction.atomic(durable=True):
                append(saga_id=saga_id, tenant_id=tenant, drafts=drafts)
    return ids


def verify_tenant(tenant: str) -> tuple[int, int, float]:
    """(chains, events, seconds) of one full verification of the tenant's chains; raises on a broken chain."""
    from audit.verification import events_for, verify

    started = time.perf_counter()
    run = verify(events_for(tenant=tenant))
    took = time.perf_counter() - started
    if run.broken:
        raise AssertionError(f"{len(run.broken)} broken chain(s) in tenant {tenant}")
    return len(run.chains), run.events, took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--sagas", type=int, default=100)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "saga_project.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-not-for-production")
    os.environ.setdefault("DEBUG", "false")
    import django

    django.setup()
    from audit.models import AuditEvent

    AuditEvent.objects.filter(tenant_id="bench").delete()
    started = time.perf_counter()
    populate(args.events, args.sagas)
    written = time.perf_counter() - started
    chains, events, took = verify_tenant("bench")
    assert events == args.events - args.events % args.sagas
    print(
        f"wrote {events} events in {written:.1f}s; verified {chains} chains, {events} events "
        f"in {took:.2f}s ({events / took:,.0f} events/s)"
    )


if __name__ == "__main__":
    main()
