"""Fan-out without broker hops: ready nodes claimed in a finishing node's commit run on this process's threads.

When a node's outcome is recorded, `dispatch_ready` (sagas.coordinator.execution.node_attempts) claims in that same
commit the next node for the finishing thread to chain into and, up to the run's capacity and a free local thread each,
further ready nodes for this process's fan-out threads (`SAGA_FAN_OUT_THREADS`, on Celery workers as on the
embedded executor). Only nodes beyond that are nudged to other workers, in one batch as before.

A local claim is an ordinary claim: the node is EXECUTING under a lease with a fence token, written by the same
`_claim_node` with all its checks. The claims are handed to the threads only after the commit, and a thread is
reserved for each before the claim is made, so a claimed node never waits in a queue while its lease runs out. If
the process dies between the commit and the call, the lease expires and the recovery sweep reclaims the node,
exactly as for a worker that died holding a nudged claim.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.conf import settings

from audit import telemetry
from sagas import executor
from sagas.coordinator.execution.attempts import Claim

logger = logging.getLogger("sagas.coordinator")

# A READY node nudged less than this long ago is not nudged again by a finishing node (its nudge is on its way).
NUDGE_IN_FLIGHT_SECONDS = 1.0

# Runs one claim to its recorded outcome; returns the claim it chained into in the same commit, if any.
RunClaim = Callable[[Claim], "Claim | None"]


class _Threads:
    """How many fan-out threads of this process are reserved (claimed in a commit, or running a claim)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy = 0

    def take(self) -> bool:
        with self._lock:
            if self._busy >= settings.SAGA_FAN_OUT_THREADS:
                return False
            self._busy += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self._busy = max(0, self._busy - 1)

    def busy(self) -> int:
        with self._lock:
            return self._busy


_THREADS = _Threads()


def busy_threads() -> int:
    """Fan-out threads of this process reserved or running now (tests wait for 0 before the database goes)."""
    return _THREADS.busy()


class LocalClaims:
    """The claims one commit made for this process's threads, each holding a reserved thread until launched."""

    def __init__(self) -> None:
        self._claims: list[Claim] = []
        self._reserved = 0

    def reserve(self) -> bool:
        """Reserve a free thread for one more claim in this commit; False when every thread is taken."""
        if not _THREADS.take():
            return False
        self._reserved += 1
        return True

    def keep(self, claim: Claim) -> None:
        """The claim made with the thread last reserved."""
        self._claims.append(claim)

    def unreserve(self) -> None:
        """The claim the last reservation was for did not happen (refused, or a held call)."""
        self._reserved -= 1
        _THREADS.give_back()

    def __len__(self) -> int:
        return len(self._claims)

    def launch(self, run: RunClaim) -> None:
        """After commit: each claim runs on its reserved thread, and keeps chaining from there."""
        trace = telemetry.carrier()
        while self._claims:
            claim = self._claims.pop(0)
            self._reserved -= 1
            try:
                executor.submit_fan_out(_chain(claim, run, trace))
            except RuntimeError:  # the pool is shut down (the process is exiting): the lease expiry recovers it
                _THREADS.give_back()
                logger.warning("fan-out claim not started saga_id=%s node_id=%s", claim.saga_id, claim.node_id)

    def release(self) -> None:
        """Give back what was not launched: the commit rolled back, so its claims never existed."""
        while self._reserved > 0:
            self.unreserve()
        self._claims.clear()


def _chain(claim: Claim, run: RunClaim, trace: dict[str, str]) -> Callable[[], None]:
    def work() -> None:
        with telemetry.attached(trace), telemetry.span("saga.fan_out", saga_id=str(claim.saga_id)):
            current: Claim | None = claim
            while current is not None:
                current = run(current)

    def job() -> None:
        try:
            executor.in_worker_thread(work)()  # logs a failure and hands the thread's connection back
        finally:
            _THREADS.give_back()  # only now: the connection is back too

    return job
