"""MCP tasks, durably: a request answered now with a task handle and later with its result (docs/proxy.md, "Held
calls as MCP tasks"; issue 19 reuses this for its own long tools).

The layer is general: `service.TaskService` creates tasks (McpTask rows, durable before the handle is returned)
and drives each to its end through the `TaskKind` registered for it, in whichever process is serving; `methods`
serves tasks/get, tasks/result, tasks/list, tasks/cancel and tasks/update on an SDK low-level Server;
`negotiation` says whether a request may be answered with a task and puts the handle on the wire; `wire` spells
tasks for each era (2025-11-25 experimental tasks, the 2026-07-28 `io.modelcontextprotocol/tasks` extension).
A kind (the proxy's held calls: sagas.protocols.proxy.held_tasks) keeps what it needs in the row and decides
through the operation table like every surface. Tests: tests/proxy/test_held_call_tasks.py.
"""
