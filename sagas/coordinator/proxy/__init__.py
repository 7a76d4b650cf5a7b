"""The MCP proxy's journal: proxied calls, held calls, the snapshot contract a call pins, and the undo of a session."""
