"""Runs agents: the rooms, and who may enter them.

- `services`, `run_control`: the doors the web edges (canvas) use: create a conversation,
  post a message, run / pause / interrupt / resume. The only modules canvas imports besides
  `control.approvals` (decisions), `profile_checks` (a model profile's connection test, made
  on a worker) and a few read helpers.
- `tasks`: the Celery edges (a slice, the sweeper, a webhook delivery); thin.
- `chain/`: the run chain, agent-agnostic: lease claim and release, the per-process lease
  keeper (heartbeat), slices and their hand-over, dispatch to queues, admission (concurrent
  runs per team), the due-time sweeper, worker hosts, transient-fault retries, interrupts.
- `step/`: our own agent's step: the slice runner, the loop's pure decisions, the model call
  (LiteLLM, scripted models, profiles), the history cache, limits, stuck detection.
- `control/`: what people and policy say about a step: approvals, confirmation, risk, hooks
  and their call points, UserPromptSubmit, team notifications, redaction of what leaves.
- `tools/`: the agent's tools (terminal, file editor, think, finish) and their registry.
- `mcp/`: the team's MCP servers (issue 16): their admin service, and on workers the
  connections and tools a slice of our agent gets.
- `subagents/`: sub-agents (issue 13): agent definitions and a child's tools, the workflow
  tool's script.

Imports point inward: nothing here imports canvas. The chain uses the step's pure pieces
(the history cache, run-end events) and builds an agent only through `chain.slices.agent_for`.
The web process never imports `step.llm` or `step.runner`, so LiteLLM stays on workers
(tests/test_web_imports.py).
"""
