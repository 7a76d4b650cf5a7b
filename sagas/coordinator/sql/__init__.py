"""The one room of hand-written SQL: the coordinator's hot-path statements, by name, and the pipeline they travel in.

- `statements`: the named statements (`lock_saga`, `cas_status`, `update_row`, `insert_saga`, `insert_steps`,
  `insert_events`, `node_and_step`, `ready_nodes`, `dependants_ready`, `action_rows`, `tenant_stopped`, ...);
- `rows`: the machinery under them (SQL text built once per model and columns, values prepared and rows converted
  as the ORM does);
- `pipeline`: PostgreSQL pipeline mode, which sends a transaction's writes with its next read and its COMMIT, and
  the compare-and-set check that travels with a queued write (`saga_expect_rows`, sagas migration 0010).

Everything else reads and writes through the ORM; `.ci/grep-checks` refuses `cursor.execute` outside this package.
"""
