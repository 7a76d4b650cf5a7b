"""sagas.selectors names the reads surfaces call, each loaded from its module when first read (so importing one
selector module does not load them all: tests/commands/test_operator_setup.py)."""

from __future__ import annotations

import importlib

import pytest

from sagas import selectors


@pytest.mark.parametrize("name", selectors.__all__)
def test_every_name_is_its_modules_own(name: str):
    module = importlib.import_module(f"sagas.selectors.{selectors._MODULES[name]}")

    assert getattr(selectors, name) is getattr(module, name)


def test_the_names_are_the_ones_listed():
    assert sorted(selectors._MODULES) == sorted(selectors.__all__)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_read"):
        selectors.no_such_read  # noqa: B018


def test_from_import_finds_a_name_and_a_module_alike():
    from sagas.selectors import held_calls_pending, proxy_sessions

    assert held_calls_pending.__module__ == "sagas.selectors.proxy_sessions"
    assert proxy_sessions.__name__ == "sagas.selectors.proxy_sessions"
