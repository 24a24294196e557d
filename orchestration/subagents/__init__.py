"""Sub-agents: children as durable conversations, and the workflow script that drives them.

- `definitions`: agent definitions (`subagent_type`): the built-in `general`, team ones, and
  `.agents/agents/*.md` read from the workspace as untrusted content; which one a child runs
  and which tools it gets (never more than its parent's or the policy's). Pure.
- `team_agents`: the team's own definitions (admins write them; audited).
- `spawn`: a spawning call's children, checked against the policy and created in one
  transaction with the parent's `subagents.spawned` event.
- `parent`: the parent's side in its runner: carry out task, delegate and workflow calls from
  the log, and wait for children without holding a worker.
- `settle`: a round's results, written once under the parent's row lock, and the parent's
  continuation.
- `results`: what the parent's model reads (pure).
- `workflow_script`: the `workflow(script)` tool's script, checked, then run by replay in a
  limited process.
"""
