from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from registry.models import ActionDefinition
from tests.registry.conftest import EXAMPLE_REGISTRY

pytestmark = pytest.mark.django_db


def _run(*args: str) -> str:
    out = StringIO()
    call_command("load_actions", *args, stdout=out)
    return out.getvalue()


def test_load_actions_prints_summary() -> None:
    # given an empty registry
    # when the example file is loaded
    output = _run(str(EXAMPLE_REGISTRY))
    # then one summary line lists what was created
    assert output.strip() == (
        f"Loaded {EXAMPLE_REGISTRY}: 4 created (noop@1.0.0, charge_card@1.0.0, update_inventory@1.0.0, "
        "crm_create_contact@1.0.0), 0 unchanged, 0 activated."
    )
    assert ActionDefinition.objects.count() == 4


def test_load_actions_second_run_reports_unchanged() -> None:
    # given the example already loaded
    _run(str(EXAMPLE_REGISTRY))
    # when loaded again
    output = _run(str(EXAMPLE_REGISTRY))
    # then
    assert (
        "0 created, 4 unchanged (noop@1.0.0, charge_card@1.0.0, update_inventory@1.0.0, crm_create_contact@1.0.0)"
        in output
    )


def test_load_actions_bad_file_raises_command_error(tmp_path: Path, example_document: dict[str, Any]) -> None:
    # given a file with an invalid retry policy
    example_document["actions"][1]["execution_policy"]["forward"]["max_attempts"] = 0
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(example_document), encoding="utf-8")
    # when loaded
    with pytest.raises(CommandError) as caught:
        _run(str(path))
    # then the error names the path of the problem and nothing was written
    assert "INVALID_CONTRACT" in str(caught.value)
    assert "actions[1].execution_policy.forward.max_attempts: 0 is less than the minimum of 1" in str(caught.value)
    assert not ActionDefinition.objects.exists()


def test_load_actions_defaults_to_setting(settings: Any) -> None:
    # given SAGA_ACTIONS_FILE points at the example
    settings.SAGA_ACTIONS_FILE = str(EXAMPLE_REGISTRY)
    # when run without a file
    output = _run()
    # then that file is loaded
    assert "4 created" in output


def test_load_actions_without_file_or_setting_fails(settings: Any) -> None:
    settings.SAGA_ACTIONS_FILE = ""
    with pytest.raises(CommandError, match="pass FILE or set SAGA_ACTIONS_FILE"):
        _run()
