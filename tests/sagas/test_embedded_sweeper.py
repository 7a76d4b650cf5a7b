"""The embedded recovery sweeper (sagas/sweeper.py) runs passes on its own thread and says when one is slow: every
expired attempt waits that long to be reclaimed, so a slow database or broker shows up in the log."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from sagas import sweeper as sweeper_module
from sagas.sweeper import EmbeddedSweeper


def test_a_pass_slower_than_five_intervals_is_logged_and_remembered(caplog: pytest.LogCaptureFixture):
    embedded = EmbeddedSweeper(interval=1.0)
    with caplog.at_level(logging.WARNING, logger="sagas.sweeper"):
        embedded._timed(0.4)
        embedded._timed(7.5)
        embedded._timed(2.0)
    assert embedded.longest_pass_seconds == 7.5
    [warning] = [r for r in caplog.records if r.name == "sagas.sweeper"]
    assert "took 7.5s" in warning.getMessage() and "database and broker" in warning.getMessage()


def test_the_thread_times_each_pass_it_runs(monkeypatch: pytest.MonkeyPatch):
    ran = threading.Event()

    def one_pass() -> None:
        time.sleep(0.05)
        ran.set()

    monkeypatch.setattr("sagas.coordinator.sagas_recover", one_pass)
    embedded = EmbeddedSweeper(interval=0.01).start()
    try:
        assert ran.wait(10), "the sweeper ran no pass"
    finally:
        embedded.stop()
    assert 0.05 <= embedded.longest_pass_seconds < sweeper_module.SLOW_PASS_SECONDS
