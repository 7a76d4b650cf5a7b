"""URL templates in HTTP actions: each value is one percent-encoded path segment or query value, never more.

Calls go to the real local HTTP server (tests/httpserver.py), and assertions are on the exact request target it
received. The saga flow (load, run, roll back by id) is in tests/sagas/test_url_template_saga.py.
"""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry.actions import InvocationContext, invoke_compensation, invoke_forward
from registry.contracts import compensation_needs_result, validate_contract, validate_registry_document
from registry.dry_requests import preview_request
from registry.errors import ActionFailure, RegistryError
from tests.httpserver import RecordingHTTPServer

ITEM_URL = "/items/${input.id}/detail?sku=${input.sku}&page=1"


def _definition(base_url: str, url: str = ITEM_URL, **contract: Any) -> dict[str, Any]:
    return {
        "id": "get_item",
        "version": "1.0.0",
        "kind": "http",
        "forward": {"url": f"{base_url}{url}", "method": "POST"},
        "compensation": {"url": f"{base_url}/items/${{result.id}}", "method": "DELETE"},
        **contract,
    }


def _ctx(**input: Any) -> InvocationContext:
    return InvocationContext(saga_id="saga-1", step_id="step-1", idempotency_key="step-1", input=input)


def _received(server: RecordingHTTPServer) -> str:
    (request,) = server.requests
    return request.path


# --- rendering: hostile values stay inside their segment or value ---------------------------------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("../admin", "..%2Fadmin"),
        ("a/b", "a%2Fb"),
        ("?x=1", "%3Fx%3D1"),
        ("#f", "%23f"),
        ("%2e%2e", "%252e%252e"),
        ("café ☕", "caf%C3%A9%20%E2%98%95"),
        ("a&page=2", "a%26page%3D2"),
        ("...", "..."),
        ("x\r\nHost: evil", "x%0D%0AHost%3A%20evil"),
        (42, "42"),
        (-7, "-7"),
    ],
)
def test_url_template_value_stays_in_its_segment_and_query_value(
    server: RecordingHTTPServer, value: Any, encoded: str
) -> None:
    # given a URL with a templated path segment and a templated query value
    # when the call runs with a hostile value in both
    invoke_forward(_definition(server.url), _ctx(id=value, sku=value))
    # then the server received exactly one encoded segment and one encoded value, the rest untouched
    assert _received(server) == f"/items/{encoded}/detail?sku={encoded}&page=1"


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("", "yields an empty string"),
        (".", "renders the path segment '.'"),
        ("..", "renders the path segment '..'"),
        ({"id": 1}, "yields an object"),
        (["a"], "yields a list"),
        (None, "yields null"),
        (True, "yields a boolean"),
        (1.5, "yields a float"),
    ],
)
def test_url_template_unusable_value_is_refused_before_sending(
    server: RecordingHTTPServer, value: Any, why: str
) -> None:
    # given a value that cannot be one path segment
    # when the call runs
    with pytest.raises(ActionFailure) as caught:
        invoke_forward(_definition(server.url), _ctx(id=value, sku="A-1"))
    # then it fails permanently, naming the URL and the template, and nothing was sent
    failure = caught.value
    assert (failure.code, failure.retryable, failure.uncertain) == ("URL_TEMPLATE_VALUE_INVALID", False, False)
    assert failure.message.startswith(f"forward.url: template ${{input.id}} {why}")
    assert "The request was not sent" in failure.message
    assert server.requests == []


def test_url_template_dots_are_ordinary_text_in_a_query_value(server: RecordingHTTPServer) -> None:
    # given '..' in a query value, where nothing resolves dot segments
    # when the call runs
    invoke_forward(_definition(server.url), _ctx(id="i-1", sku=".."))
    # then it is sent as is
    assert _received(server) == "/items/i-1/detail?sku=..&page=1"


def test_url_template_missing_field_is_permanent(server: RecordingHTTPServer) -> None:
    # when the input lacks the field the URL needs
    with pytest.raises(ActionFailure) as caught:
        invoke_forward(_definition(server.url), _ctx(sku="A-1"))
    # then
    assert caught.value.code == "TEMPLATE_PATH_MISSING"
    assert "forward.url: template ${input.id} cannot be rendered: input has no 'id'" in caught.value.message
    assert server.requests == []


def test_url_template_inside_a_segment_is_encoded_alone(server: RecordingHTTPServer) -> None:
    # given templates with literal text around them in a segment and a query value
    definition = _definition(server.url, url="/v1/item-${input.id}.json?q=sku:${input.sku}")
    # when the call runs
    invoke_forward(definition, _ctx(id="a/../b", sku="x&y"))
    # then only the values are encoded
    assert _received(server) == "/v1/item-a%2F..%2Fb.json?q=sku:x%26y"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.one_of(st.text(min_size=1).filter(lambda text: text not in (".", "..")), st.integers()))
def test_url_template_any_value_decodes_back_to_itself(server: RecordingHTTPServer, value: str | int) -> None:
    # given any non-empty text (or integer) as the path id and the query sku
    server.reset()
    # when the call runs
    invoke_forward(_definition(server.url), _ctx(id=value, sku=value))
    # then the path has exactly the contract's segments, the query exactly its values, each decoding to the value
    target = urlsplit(_received(server))
    segments = target.path.split("/")
    assert segments[:2] == ["", "items"] and segments[3:] == ["detail"]
    assert unquote(segments[2], errors="strict") == str(value)
    assert parse_qsl(target.query, keep_blank_values=True, errors="strict") == [("sku", str(value)), ("page", "1")]


def test_url_template_compensation_uses_result_and_failures_name_the_rendered_url(
    server: RecordingHTTPServer,
) -> None:
    # given a compensation addressed by the forward result's id, which the remote refuses
    server.script("/items/it_9", [(404, {"error": "gone"})])
    ctx = InvocationContext(
        saga_id="saga-1", step_id="step-1", idempotency_key="step-1:rollback", input={}, result={"id": "it_9"}
    )
    # when it runs
    with pytest.raises(ActionFailure) as caught:
        invoke_compensation(_definition(server.url), ctx)
    # then the request went to the rendered URL, and the journaled message names that URL
    assert [(r.method, r.path) for r in server.requests] == [("DELETE", "/items/it_9")]
    assert caught.value.message.startswith(f"DELETE {server.url}/items/it_9 answered 404")
    assert "${" not in caught.value.message


def test_url_template_in_compensation_needs_the_forward_result() -> None:
    # a URL reading the forward result cannot run for a step without one (the coordinator skips or escalates it)
    assert compensation_needs_result(_definition("http://127.0.0.1:9"))


def test_url_template_preview_shows_the_rendered_url() -> None:
    # when a preview renders the forward request
    request = preview_request(
        _definition("http://127.0.0.1:9"), input={"id": "a/b", "sku": "S 1"}, saga_id="s", step_id="t"
    )
    # then it shows the URL the real call would use
    assert request["forward"]["url"] == "http://127.0.0.1:9/items/a%2Fb/detail?sku=S%201&page=1"


# --- validation: where templates may stand --------------------------------------------------------------------


def _document(contract: dict[str, Any]) -> dict[str, Any]:
    return {"schema_version": 1, "actions": [contract]}


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://${input.host}/services", "${input.host} is in the scheme, host or port"),
        ("https://api.example.com:${input.port}/services", "${input.port} is in the scheme, host or port"),
        ("https://${input.user}@api.example.com/services", "${input.user} is in the scheme, host or port"),
        ("https://api.${input.zone}.example.com/x", "${input.zone} is in the scheme, host or port"),
        ("https://api.example.com/services#${input.id}", "${input.id} is in the fragment"),
        ("https://api.example.com/services?${input.key}=1", "${input.key} is in a query parameter name"),
        ("https://api.example.com/services/${result.id}", "only allowed in compensation"),
        ("https://api.example.com/services/${input}", "${input} is the whole input, which is always an object"),
        ("https://api.example.com/services/${secret.token}", "uses the unknown root 'secret'"),
        ("https://api.example.com/services/${input.a b}", "path segments must be letters"),
        ("https://api.example.com/services/${input.{id}}", "has a '${' that does not open a complete template"),
    ],
)
def test_url_template_misplaced_or_malformed_is_refused_at_load(
    http_contract: dict[str, Any], url: str, expected: str
) -> None:
    # given a forward URL with a template where it may not stand
    http_contract["forward"]["url"] = url
    # when the registry file is validated
    with pytest.raises(RegistryError) as caught:
        validate_registry_document(_document(http_contract))
    # then the problem names the path of the URL and says what is wrong
    assert caught.value.code == "INVALID_CONTRACT"
    assert any(p.startswith("actions[0].forward.url: ") and expected in p for p in caught.value.problems), (
        caught.value.problems
    )


def test_url_template_in_the_scheme_is_refused_at_load(http_contract: dict[str, Any]) -> None:
    # given a templated scheme
    http_contract["compensation"]["url"] = "${input.scheme}://api.example.com/refunds"
    # when validated
    with pytest.raises(RegistryError) as caught:
        validate_registry_document(_document(http_contract))
    # then both the shape rule and the template rule name the compensation URL
    problems = [p for p in caught.value.problems if p.startswith("actions[0].compensation.url: ")]
    assert any("is not an absolute http:// or https:// URL" in p for p in problems), problems
    assert any("${input.scheme} is in the scheme, host or port" in p for p in problems), problems


@pytest.mark.parametrize(
    ("schema", "declared"),
    [({"type": "object"}, "object"), ({"type": "array"}, "array"), ({"type": ["boolean", "null"]}, "boolean/null")],
)
def test_url_template_of_a_value_the_schema_rules_out_is_refused(
    http_contract: dict[str, Any], schema: dict[str, Any], declared: str
) -> None:
    # given an input field the input schema declares as something that cannot be a segment
    http_contract["input_schema"] = {"type": "object", "properties": {"tags": schema}}
    http_contract["forward"]["url"] = "https://api.example.com/items/${input.tags}"
    # when validated
    with pytest.raises(RegistryError) as caught:
        validate_contract(http_contract)
    # then
    (problem,) = caught.value.problems
    assert problem.startswith(
        f"contract.forward.url: ${{input.tags}} names a value that the contract's input schema declares as {declared}"
    )


def test_url_template_output_schema_is_checked_for_compensation(http_contract: dict[str, Any]) -> None:
    # given a compensation URL reading a result field the output schema declares as an object
    http_contract["output_schema"] = {"type": "object", "properties": {"charge": {"type": "object"}}}
    http_contract["compensation"]["url"] = "https://api.example.com/charges/${result.charge}/refund"
    # when validated
    with pytest.raises(RegistryError) as caught:
        validate_contract(http_contract)
    # then
    assert "output schema declares as object" in caught.value.problems[0]


def test_url_templates_the_issue_describes_are_accepted(http_contract: dict[str, Any]) -> None:
    # given the URL shapes of the replaced product's registry and common REST APIs
    http_contract["input_schema"] = {
        "type": "object",
        "properties": {"sku": {"type": "string"}, "n": {"type": "number"}},
    }
    http_contract["forward"]["url"] = "https://api.example.com/items?sku=${input.sku}&n=${input.n}&saga=${saga.id}"
    http_contract["compensation"]["url"] = "https://api.example.com/charges/${result.id}/refund#docs"
    deletion = copy.deepcopy(http_contract)
    deletion["compensation"] = {"url": "https://api.example.com/services/${result.id}", "method": "DELETE"}
    # when validated, then nothing is refused
    validate_contract(http_contract)
    validate_contract(deletion)
