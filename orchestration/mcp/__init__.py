"""MCP servers a team configures, as tools of our own agent (issue 16).

- `rules`: the value rules and `McpServerConfig` (pure); `servers`: the admin service (checks,
  audit) the API and the settings page call, and the worker's read of a run's servers.
- On the worker, per slice: `slice.mcp_tools` (the runner's one entry point) resolves each
  server's launch (`launch`: secrets by reference, sandbox, network), connects through
  `toolbox` (its own thread and event loop) over `stdio` (the sandbox) or `http` (the
  outbound-address guard), and offers each tool as a `tool.McpTool`; `results` turns a call's
  result into what the model reads.
"""
