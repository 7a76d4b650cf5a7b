"""A run followed from outside the request that started it: surface-less entries of the operation table (no MCP
tool, no A2A operation, no REST route) that the MCP task of a run_ready_steps call (sagas.protocols.mcp.saga_tasks)
invokes. `get_saga_run` reads how the run stands without starting anything (run_ready_steps would re-budget and
nudge); `stop_saga_run` withdraws the run's remaining budget when its task is cancelled.
"""

from __future__ import annotations

from typing import Any

from governance.identity.principal import Principal
from governance.identity.rbac import Capability
from sagas import coordinator, selectors
from sagas.operations.arguments import RunArgs, SagaRef
from sagas.operations.operation import READ, Hints, Operation
from sagas.operations.schemas import OUT_RUN
from sagas.selectors import shapes


def run_status(actor: Principal, a: RunArgs) -> dict[str, Any]:
    saga = selectors.saga_get(actor=actor, saga_id=a.saga_id)  # tenant-scoped: another tenant's id is not found
    report = coordinator.run_report(saga.id, a.max_steps)
    return {**shapes.saga_to_dict(report.saga), "run": report.as_dict()}


def stop_run(actor: Principal, a: SagaRef) -> dict[str, Any]:
    report = coordinator.saga_run_stop(actor=actor, saga_id=a.saga_id)
    return {**shapes.saga_to_dict(report.saga), "run": report.as_dict()}


RUN_CONTROL_OPERATIONS: list[Operation[Any]] = [
    Operation(
        "get_saga_run",
        "get_saga_run",
        RunArgs,
        run_status,
        Capability.READ,
        OUT_RUN,
        "How a saga's run stands",
        "The saga and its run report (node counts, in flight, settled); starts nothing.",
        hints=READ,
        mcp=False,
        a2a=False,
    ),
    Operation(
        "stop_saga_run",
        "stop_run",
        SagaRef,
        stop_run,
        Capability.EXECUTE,
        OUT_RUN,
        "Stop a saga's run",
        "No further attempt starts; attempts in flight end as they will.",
        hints=Hints(idempotent=True),
        mcp=False,
        a2a=False,
    ),
]
