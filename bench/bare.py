"""The floor: one `INSERT` of one row and its `COMMIT`, through psycopg on the bench database, per operation."""

from __future__ import annotations

import time

import psycopg

from bench.common import SAGA_DB, pg_url


class BareInsert:
    """A connection held open for the whole run, as the coordinator's workers hold theirs."""

    def __init__(self) -> None:
        self.conn = psycopg.connect(pg_url(SAGA_DB))
        self.conn.execute("CREATE TABLE IF NOT EXISTS bench_bare (id bigserial PRIMARY KEY, payload text NOT NULL)")
        self.conn.execute("TRUNCATE bench_bare")
        self.conn.commit()

    def round(self, ops: int) -> list[float]:
        """Seconds per INSERT+COMMIT, one sample per operation."""
        samples: list[float] = []
        for _ in range(ops):
            started = time.perf_counter()
            self.conn.execute("INSERT INTO bench_bare (payload) VALUES (%s)", ["x"])
            self.conn.commit()
            samples.append(time.perf_counter() - started)
        return samples

    def close(self) -> None:
        self.conn.close()


def select_one_round_trip(ops: int = 200) -> list[float]:
    """Seconds per `SELECT 1` on an open connection: one statement's round trip, for reading per-statement costs."""
    with psycopg.connect(pg_url(SAGA_DB), autocommit=True) as conn:
        samples: list[float] = []
        for _ in range(ops):
            started = time.perf_counter()
            conn.execute("SELECT 1").fetchone()
            samples.append(time.perf_counter() - started)
    return samples
