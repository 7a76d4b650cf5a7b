"""Whole-value templates that read every item of a list (`${result.entities[*].name}`), as a compensation pack's
inverse needs for a call that created several things at once (registry.templating)."""

from __future__ import annotations

import pytest

from registry.errors import ActionFailure
from registry.templating import render, template_problems
from registry.url_templates import url_template_problems

ANSWER = {"entities": [{"name": "Ada", "kind": "person"}, {"name": "Lin", "kind": "person"}], "count": 2}


def test_a_projection_gives_the_list_of_each_items_field():
    body = {"entityNames": "${result.entities[*].name}", "count": "${result.count}"}
    assert render(body, {"result": ANSWER}) == {"entityNames": ["Ada", "Lin"], "count": 2}
    assert render({"all": "${result.entities[*]}"}, {"result": ANSWER}) == {"all": ANSWER["entities"]}


def test_an_empty_list_projects_to_an_empty_list():
    assert render({"names": "${result.entities[*].name}"}, {"result": {"entities": []}}) == {"names": []}


@pytest.mark.parametrize(
    ("template", "says"),
    [
        ("${result.count[*].name}", "result.count is a int, not a list"),
        ("${result.entities[*].age}", "result.entities[1] has no 'age'"),
    ],
)
def test_a_projection_that_does_not_fit_the_answer_is_a_permanent_failure_naming_where(template: str, says: str):
    answer = {**ANSWER, "entities": [{"name": "Ada", "age": 36}, {"name": "Lin"}]}
    with pytest.raises(ActionFailure) as failed:
        render({"x": template}, {"result": answer})
    assert failed.value.code == "TEMPLATE_PATH_MISSING" and says in failed.value.message
    assert not failed.value.retryable


def test_a_projection_is_a_whole_value_never_part_of_a_url():
    assert template_problems({"x": "${result.entities[*].name}"}, "body", allow_result=True) == []
    url = "https://api.example/items/${result.entities[*].name}"
    problems = url_template_problems(url, "url", allow_result=True, schemas={})
    assert problems and "path segments must be letters" in problems[0]
