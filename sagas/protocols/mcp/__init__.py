"""MCP: the server of the operation table's tools, its Streamable HTTP app, progress, long tools as tasks (tasks/), and
saga resources, subscriptions, logging and completion (resources/)."""
