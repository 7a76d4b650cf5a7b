"""`verify_audit` and `export_audit`: every kind of tampering is named, truncation is caught against a manifest."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditEvent
from governance.identity.principal import Principal
from sagas import coordinator
from tests.audit.helpers import run_verify_audit


@pytest.fixture
def sagas(transactional_db: None, operator: Principal, outsider: Principal) -> list[str]:
    ids = []
    for actor in (operator, operator, outsider):
        saga = coordinator.saga_begin(actor=actor)
        for name in ("one", "two", "three"):
            coordinator.saga_checkpoint(actor=actor, saga_id=saga.id, name=name)
        ids.append(str(saga.id))
    return ids


def test_intact_chains_verify(sagas: list[str]):
    code, text = run_verify_audit()
    assert code == 0 and "all chains verify" in text and "events checked  12" in text


@pytest.mark.parametrize("tamper", ["modify", "delete_middle", "reorder", "unlink"])
def test_tampering_is_named_with_saga_and_first_broken_sequence(sagas: list[str], tamper: str):
    target = AuditEvent.objects.filter(saga_id=sagas[1])
    if tamper == "modify":
        target.filter(sequence=3).update(event_type="CHECKPOINT_EDITED")
    elif tamper == "delete_middle":
        target.filter(sequence=2).delete()
    elif tamper == "reorder":
        target.filter(sequence=2).update(sequence=99)
        target.filter(sequence=3).update(sequence=2)
        target.filter(sequence=99).update(sequence=3)
    else:
        target.filter(sequence=4).update(previous_hash="0" * 64)
    code, text = run_verify_audit()
    assert code == 1
    assert f"BROKEN saga {sagas[1]}" in text and (
        "at sequence 2" in text or "at sequence 3" in text or "at sequence 4" in text
    )
    assert sagas[0] not in text


def test_json_output_and_tenant_filter(sagas: list[str]):
    code, text = run_verify_audit("--json", "--tenant", "globex")
    document = json.loads(text)
    assert code == 0 and document["sagas_checked"] == 1 and document["valid"] is True


def test_truncation_of_the_newest_rows_is_caught_against_an_earlier_manifest(sagas: list[str], tmp_path: Path):
    # given an export with its manifest
    events, manifest = tmp_path / "events.jsonl", tmp_path / "manifest.json"
    call_command("export_audit", "--events", str(events), "--manifest", str(manifest), stdout=io.StringIO())
    assert len(events.read_text().splitlines()) == 12
    # when the newest events of one saga are deleted (the chain alone still verifies)
    AuditEvent.objects.filter(saga_id=sagas[2], sequence__gte=3).delete()
    assert run_verify_audit()[0] == 0
    # then the manifest reveals it
    code, text = run_verify_audit("--against", str(manifest))
    assert code == 1 and f"BROKEN saga {sagas[2]}" in text and "truncated" in text


def test_an_edited_manifest_is_refused(sagas: list[str], tmp_path: Path):
    events, manifest = tmp_path / "events.jsonl", tmp_path / "manifest.json"
    call_command("export_audit", "--events", str(events), "--manifest", str(manifest), stdout=io.StringIO())
    document = json.loads(manifest.read_text())
    next(iter(document["sagas"].values()))["head_sequence"] = 1
    manifest.write_text(json.dumps(document))
    with pytest.raises(CommandError, match="edited"):
        run_verify_audit("--against", str(manifest))
