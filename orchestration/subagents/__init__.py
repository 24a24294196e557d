"""Sub-agents: children as durable conversations, and the workflow script that drives them.

- `definitions`: agent definitions (`subagent_type`): the built-in `general`, team ones, and
  `.agents/agents/*.md` read from the workspace as untrusted content; which one a child runs
  and which tools it gets (never more than its parent's or the policy's). Pure.
- `workflow_script`: the `workflow(script)` tool's script, checked, then run by replay in a
  limited process.
"""
