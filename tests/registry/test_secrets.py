from __future__ import annotations

import pytest

from registry.errors import ActionFailure
from registry.secrets import EnvSecretProvider, resolve_header


def test_resolve_header_literal_passes_through() -> None:
    assert resolve_header("application/json") == "application/json"


def test_resolve_header_secret_with_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    # given the variable is set
    monkeypatch.setenv("SAGA_TEST_TOKEN", "abc123")
    # when a reference with a prefix is resolved
    # then
    assert resolve_header({"secret_ref": "env://SAGA_TEST_TOKEN", "prefix": "Bearer "}) == "Bearer abc123"


@pytest.mark.parametrize(("value", "state"), [(None, "not set"), ("", "empty")])
def test_env_secret_unavailable_names_variable(monkeypatch: pytest.MonkeyPatch, value: str | None, state: str) -> None:
    # given the variable is missing or empty
    if value is None:
        monkeypatch.delenv("SAGA_TEST_TOKEN", raising=False)
    else:
        monkeypatch.setenv("SAGA_TEST_TOKEN", value)
    # when resolved
    with pytest.raises(ActionFailure) as caught:
        EnvSecretProvider().resolve("env://SAGA_TEST_TOKEN")
    # then the failure is permanent and says which variable to set
    assert (caught.value.code, caught.value.retryable) == ("SECRET_UNAVAILABLE", False)
    assert f"SAGA_TEST_TOKEN is {state}" in caught.value.message


def test_secret_with_line_break_refused_without_echoing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # given a secret value that would inject a header
    monkeypatch.setenv("SAGA_TEST_TOKEN", "abc\r\nX-Evil: 1")
    # when resolved into a header
    with pytest.raises(ActionFailure) as caught:
        resolve_header({"secret_ref": "env://SAGA_TEST_TOKEN"})
    # then it is refused and the value is not in the message
    assert caught.value.code == "SECRET_INVALID"
    assert "X-Evil" not in caught.value.message


def test_action_failure_as_dict_includes_receipt_only_when_present() -> None:
    plain = ActionFailure("X", "m", retryable=True)
    with_receipt = ActionFailure("X", "m", retryable=False, uncertain=True, receipt={"status_code": 500})
    assert plain.as_dict() == {"code": "X", "message": "m", "retryable": True, "uncertain": False}
    assert with_receipt.as_dict()["receipt"] == {"status_code": 500}


def test_a_seed_secret_header_suffix_follows_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEED_SUFFIX_TOKEN", "s3cret")
    header = {"secret_ref": "env://SEED_SUFFIX_TOKEN", "prefix": "Token ", "suffix": ";v=1"}
    assert resolve_header(header) == "Token s3cret;v=1"
