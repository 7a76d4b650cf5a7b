"""The coordinator: the only code that changes saga, node, step, approval or checkpoint state.

Every surface (MCP, A2A, REST, admin, Celery tasks, management commands) translates into these functions. Each
public function takes keyword-only arguments including `actor` (a governance Principal), runs its state
changes in short durable transactions that lock the saga row first, writes the audit event of every change in the
same transaction, and never performs a side effect inside a transaction. One module per thing it changes
(docs/architecture.md section 1 lists them); surfaces call the public functions by this package's name.

Invariants and the tests that pin them:
- every status change of a saga, node, step or approval is one table-checked compare-and-set (`_tx.Tx.transition`),
  refusing unlisted moves and stale reads (tests/sagas/test_guarded_transition.py); the tables are the documented
  state machines (test_state_tables.py); a refusal keeps its evidence and is raised after commit;
- write-ahead: a step row is EXECUTING before its action is called (tests/sagas/test_write_ahead.py);
- input is validated before any step row exists (test_input_output_validation.py);
- forward retries reuse one step id, compensation uses `<step id>:rollback` (test_retries.py, tests/registry);
- compensation newest-first from the persisted snapshot, hash-checked, never twice (test_compensation.py);
- commit only with every planned node COMPLETED (test_commit.py); state survives a restart (test_restart.py);
- a nudge decides nothing: nodes are claimed with a fenced compare-and-set under the saga lock, and a write whose
  fence no longer matches is refused and audited (test_fencing.py, tests/distributed/test_crash_recovery.py);
- a proxied tools/call is journaled before it is forwarded, refused calls are REFUSED steps, held calls are nodes
  the executor never claims (tests/proxy/test_journaled_calls.py, test_held_calls.py, test_proxy_crash.py);
- `max_parallel` bounds a saga's attempts in flight across all workers (tests/distributed/test_execution_modes.py);
- an expired lease gets exactly its contract's outcome (re-run if idempotent, else compensate or escalate), and
  two sweepers never handle one saga twice (tests/distributed/test_crash_recovery.py, test_concurrency.py).
"""

from sagas.coordinator._proxied_journal import Begun
from sagas.coordinator._tx import write_intents_with
from sagas.coordinator.approvals import node_approve
from sagas.coordinator.execution.immediate_steps import saga_step_execute
from sagas.coordinator.execution.node_attempts import node_execute
from sagas.coordinator.nodes import node_plan, node_retry
from sagas.coordinator.previews import saga_promote
from sagas.coordinator.proxy.calls import (
    proxy_call_begin,
    proxy_call_finish,
    proxy_reads_record,
    proxy_session_open,
)
from sagas.coordinator.proxy.held_calls import proxy_call_client_decide, proxy_call_release, proxy_call_withdraw
from sagas.coordinator.proxy.intents import materialize, proxy_call_intend, proxy_calls_record
from sagas.coordinator.proxy.undo import UndoReport, proxy_session_undo
from sagas.coordinator.recovery import RecoveryReport, sagas_recover
from sagas.coordinator.rollback import saga_rollback, saga_rollback_resume
from sagas.coordinator.runs import RunReport, run_report, saga_run_ready, saga_run_stop
from sagas.coordinator.sagas import saga_begin, saga_checkpoint, saga_commit

# Every transaction on a proxy session first writes the session's call intents as their steps (the proxy's module
# builds on the transaction's, so it is named here, where the package is put together).
write_intents_with(materialize)

__all__ = [
    "Begun",
    "RecoveryReport",
    "RunReport",
    "UndoReport",
    "node_approve",
    "node_execute",
    "node_plan",
    "node_retry",
    "proxy_call_begin",
    "proxy_call_client_decide",
    "proxy_call_finish",
    "proxy_call_intend",
    "proxy_call_release",
    "proxy_call_withdraw",
    "proxy_calls_record",
    "proxy_reads_record",
    "proxy_session_open",
    "proxy_session_undo",
    "run_report",
    "saga_begin",
    "saga_checkpoint",
    "saga_commit",
    "saga_promote",
    "saga_rollback",
    "saga_rollback_resume",
    "saga_run_ready",
    "saga_run_stop",
    "saga_step_execute",
    "sagas_recover",
]
