"""A run_ready_steps waiting in this process is woken by an outcome of its own saga, not by others' (the poll
remains the fallback). No timings are asserted: a wake-up is shown by the counter the waiter gets back."""

from __future__ import annotations

import threading
import uuid

from sagas.coordinator.execution.run_changes import RunChanges


def test_a_waiter_sees_a_change_of_its_saga_made_on_another_thread():
    changes, saga = RunChanges(), uuid.uuid4()
    seen = changes.watch(saga)
    recorder = threading.Thread(target=changes.changed, args=(saga,))
    recorder.start()
    recorder.join()
    assert changes.wait(saga, seen, timeout=30) == seen + 1


def test_a_change_of_another_saga_does_not_count_for_this_one():
    changes, mine, other = RunChanges(), uuid.uuid4(), uuid.uuid4()
    seen = changes.watch(mine)
    changes.changed(other)
    assert changes.wait(mine, seen, timeout=0) == seen


def test_nothing_is_kept_for_a_saga_nobody_waits_on():
    changes, saga = RunChanges(), uuid.uuid4()
    changes.changed(saga)  # nobody watching: no counter is created
    seen = changes.watch(saga)
    assert seen == 0
    changes.unwatch(saga)
    changes.changed(saga)
    assert changes.watch(saga) == 0
