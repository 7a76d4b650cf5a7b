"""How fast verify_audit checks chains: writes N real chained events (M sagas), then times a full verification.

Run: DATABASE_URL=postgresql://postgres@127.0.0.1:5432/bench .venv/bin/python bench/audit_verify.py --events 100000
(a migrated database; the events are appended through audit.chain.append exactly as the coordinator does).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "saga_project.settings")
os.environ.setdefault("DEBUG", "true")

import django

django.setup()

from django.db import transaction  # noqa: E402

from audit.chain import EventDraft, append  # noqa: E402
from audit.models import AuditEvent  # noqa: E402
from audit.verification import events_for, verify  # noqa: E402

BATCH = 1000


def populate(events: int, sagas: int) -> list[uuid.UUID]:
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
                append(saga_id=saga_id, tenant_id="bench", drafts=drafts)
    return ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--sagas", type=int, default=100)
    args = parser.parse_args()
    AuditEvent.objects.filter(tenant_id="bench").delete()
    started = time.perf_counter()
    populate(args.events, args.sagas)
    written = time.perf_counter() - started
    started = time.perf_counter()
    run = verify(events_for(tenant="bench"))
    took = time.perf_counter() - started
    assert not run.broken and run.events == args.events - args.events % args.sagas
    print(
        f"wrote {run.events} events in {written:.1f}s; verified {len(run.chains)} chains, {run.events} events "
        f"in {took:.2f}s ({run.events / took:,.0f} events/s)"
    )


if __name__ == "__main__":
    main()
