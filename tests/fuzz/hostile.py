"""Hostile values for the fuzzers, and the checks every answer must pass (issue 20, item 3).

Shared by every surface: a fixed number of examples per surface (MAX_EXAMPLES), no deadline (a real server answers
over HTTP), derandomized unless SAGA_FUZZ_RANDOM=1, so CI runs the same bounded examples every time and a developer
can explore further locally.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

MAX_EXAMPLES = int(os.environ.get("SAGA_FUZZ_EXAMPLES", "25"))
OUTSIDER_MARKER = "globex-secret-marker"

FUZZ = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=os.environ.get("SAGA_FUZZ_RANDOM") != "1",
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)


def nested(depth: int) -> Any:
    """A list nested `depth` deep (the official client serializes a few hundred levels; raw HTTP sends more)."""
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def nested_object(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth):
        value = {"a": value}
    return value


huge_strings = st.sampled_from([10_000, 200_000, 900_000]).map(lambda n: "x" * n)
deep_values = st.sampled_from([40, 100, 200]).flatmap(
    lambda depth: st.sampled_from([nested(depth), nested_object(depth)])
)
odd_strings = st.sampled_from(
    [
        "",
        " ",
        "\x00",
        "../../etc/passwd",
        "' OR 1=1 --",
        "%s%s%n",
        "\ud800".encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
        "null",
        "-1",
        "9" * 400,
        "<script>alert(1)</script>",
        "\u202e\u0000\uffff",
    ]
)


def hostile(ids: list[str]) -> st.SearchStrategy[Any]:
    """Any JSON value, a huge string, deep nesting, an odd string, or one of the given ids (another tenant's)."""
    return st.one_of(json_values, huge_strings, deep_values, odd_strings, st.sampled_from(ids))


def assert_no_traceback(text: str, what: str) -> None:
    for sign in ("Traceback (most recent call last)", 'File "/', "Internal Server Error"):
        assert sign not in text, f"{what} answered with a traceback or a server error:\n{text[:2000]}"


def assert_nothing_of_outsider(text: str, sent: str, secrets: list[str], what: str) -> None:
    """The other tenant's data never appears; its ids only as an echo of what the caller sent."""
    assert OUTSIDER_MARKER not in text, f"{what} leaked the other tenant's data:\n{text[:2000]}"
    for secret in secrets:
        assert secret in sent or secret not in text, f"{what} leaked {secret}:\n{text[:2000]}"


@dataclass(frozen=True)
class Seeded:
    """The ids of one waiting saga per tenant: the caller's own, and the other tenant's that must never leak."""

    own_saga: str
    own_node: str
    outsider_saga: str
    outsider_node: str

    @property
    def outsider_ids(self) -> list[str]:
        return [self.outsider_saga, self.outsider_node]
