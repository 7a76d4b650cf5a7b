"""The throughput reference: a plain Celery chain of 10 no-op tasks on the same Redis (not durable).

The worker is `celery -A bench.celery_chain worker -c 2` (Celery defaults otherwise: early acknowledgement,
prefetch 4, no result backend). The last task of a chain pushes its finishing time to a Redis list, which is how
the harness learns that a chain finished without a result backend or polling task states.
"""

from __future__ import annotations

import os
import time
import uuid

import redis
from celery import Celery, chain

BROKER_ENV = "BENCH_CHAIN_BROKER_URL"
CHAIN_LENGTH = 10

# Not the current app: the coordinator's shared tasks must keep publishing through saga_project's app.
app = Celery("bench_chain", set_as_current=False)
app.conf.update(
    broker_url=os.environ.get(BROKER_ENV, "redis://127.0.0.1:6379/15"),
    task_ignore_result=True,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)
_redis: redis.Redis | None = None


def _client() -> redis.Redis:
    global _redis
    if _redis is None:
        _redis = redis.Redis.from_url(app.conf.broker_url)
    return _redis


@app.task(name="bench.noop")  # type: ignore[untyped-decorator]  # Celery ships no type hints
def noop(run_key: str, i: int, last: bool) -> None:
    if last:
        _client().rpush(run_key, repr(time.time()))


class CeleryChainBench:
    def __init__(self, broker_url: str) -> None:
        app.conf.broker_url = broker_url
        self.redis = redis.Redis.from_url(broker_url)

    def chains(self, concurrency: int, timeout: float = 120) -> tuple[float, int]:
        """(seconds, tasks) for `concurrency` chains of 10 no-op tasks sent at once."""
        run_key = f"bench:chain:{uuid.uuid4().hex}"
        started = time.time()
        for _ in range(concurrency):
            chain(noop.si(run_key, i, i == CHAIN_LENGTH - 1) for i in range(CHAIN_LENGTH)).apply_async()
        deadline = time.monotonic() + timeout
        pause = 0.005
        while self.redis.llen(run_key) < concurrency:
            if time.monotonic() > deadline:
                raise TimeoutError(f"plain Celery chains did not finish within {timeout:.0f}s")
            time.sleep(pause)
            pause = min(pause * 1.5, 0.05)
        finished = max(float(v) for v in self.redis.lrange(run_key, 0, -1))
        self.redis.delete(run_key)
        return finished - started, concurrency * CHAIN_LENGTH
