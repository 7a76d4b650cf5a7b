"""docs/audit_hash.md's vectors, checked byte for byte against the code that writes and verifies chains."""

from __future__ import annotations

import hashlib
import re
import uuid
from pathlib import Path

import pytest

from audit.canonical import canonical_json
from audit.chain import compute_hash, event_body
from audit.models import AuditEvent

DOC = (Path(__file__).resolve().parents[2] / "docs" / "audit_hash.md").read_text(encoding="utf-8")
SAGA = "7d0f1c1e-3b7a-4c55-9a53-2f1d1d3e0a01"


def _documented_vectors() -> list[tuple[str, str]]:
    pairs = re.findall(r"```\n(\{.*?\})\n```\n\nevent_hash `([0-9a-f]{64})`", DOC)
    assert len(pairs) == 3, "docs/audit_hash.md should document three vectors"
    return pairs


def _event(number: int, event_type: str, previous: str | None, stamp: str, **fields: object) -> AuditEvent:
    return AuditEvent(
        id=uuid.UUID(f"00000000-0000-4000-8000-00000000000{number}"),
        saga_id=uuid.UUID(SAGA),
        tenant_id="acme",
        sequence=number,
        event_type=event_type,
        actor_principal_id="alice",
        actor_type="user",
        created_at_text=stamp,
        previous_hash=previous,
        **fields,
    )


def _our_chain() -> list[tuple[bytes, str]]:
    genesis = _event(1, "SAGA_STARTED", None, "2026-11-29T10:00:00.000000Z", status="ACTIVE")
    h1 = compute_hash(None, event_body(genesis))
    step = _event(
        2,
        "STEP_STARTED",
        h1,
        "2026-11-29T10:00:01.250000Z",
        status="EXECUTING",
        action="create_text_file",
        action_version="1.0.0",
        step_id="5b6c4f0e-1c2d-4e3f-8a9b-0c1d2e3f4a5b",
        data={"attempt": 1},
    )
    h2 = compute_hash(h1, event_body(step))
    checkpoint = _event(
        3,
        "CHECKPOINT_CREATED",
        h2,
        "2026-11-29T10:00:02.000000Z",
        data={"checkpoint_id": "c1", "name": "étape größer ✓"},
    )
    h3 = compute_hash(h2, event_body(checkpoint))
    return [
        (canonical_json({"previous_hash": None, "event": event_body(genesis)}), h1),
        (canonical_json({"previous_hash": h1, "event": event_body(step)}), h2),
        (canonical_json({"previous_hash": h2, "event": event_body(checkpoint)}), h3),
    ]


@pytest.mark.parametrize("index", [0, 1, 2])
def test_documented_vector_matches_our_bytes_and_hash(index: int):
    documented_bytes, documented_hash = _documented_vectors()[index]
    our_bytes, our_hash = _our_chain()[index]
    assert our_bytes == documented_bytes.encode("utf-8")
    assert our_hash == documented_hash == hashlib.sha256(documented_bytes.encode("utf-8")).hexdigest()


def test_non_ascii_is_hashed_as_utf8_not_escaped():
    documented_bytes, _ = _documented_vectors()[2]
    assert "étape größer ✓" in documented_bytes and "\\u00e9" not in documented_bytes
