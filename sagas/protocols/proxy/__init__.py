"""The MCP proxy: a surface in front of the MCP servers an agent already uses, where every tools/call becomes a
durable, classified, gated, previewable, undoable step of the client session's saga (docs/proxy.md)."""
