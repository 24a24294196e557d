"""The workflow tool: a short async script that drives sub-agents (map, pipeline, reduce).

Carried out by the runner (orchestration.subagents.parent) through
orchestration.subagents.workflow_script: checked against an allow-list, run in a limited
process, and replayed from the top with finished children's answers read back from the log.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from orchestration.subagents.workflow_script import MAX_SOURCE_BYTES
from orchestration.tools.base import ToolArgs, ToolContext, ToolResult
from orchestration.tools.task import SPAWNED_BY_RUNNER


class WorkflowArgs(ToolArgs):
    script: str = Field(
        min_length=1,
        max_length=MAX_SOURCE_BYTES,
        description=(
            "Python: `async def main(wf):` (or a bare body) that awaits wf.run_agent(prompt, "
            "agent='general'), wf.map_agents(prompts, agent=...), wf.pipeline(steps, input) "
            "and wf.reduce_agent(results, prompt), and returns a JSON value: the result. No "
            "imports, no attribute access except wf.* and common str/list/dict methods."
        ),
    )


class WorkflowTool:
    name: ClassVar[str] = "workflow"
    description: ClassVar[str] = (
        "Run a small async Python script that orchestrates sub-agents: fan a list of prompts "
        "out with wf.map_agents, chain steps with wf.pipeline, combine results with "
        "wf.reduce_agent. Each wf.* call starts sub-agents and returns their answers as text. "
        "The script's return value is this call's result. Example:\n"
        "results = await wf.map_agents(['Summarise a.py', 'Summarise b.py'])\n"
        "return await wf.reduce_agent(results, 'Combine these summaries')"
    )
    args_model: ClassVar[type[ToolArgs]] = WorkflowArgs
    read_only: ClassVar[bool] = True

    def run(self, args: WorkflowArgs, ctx: ToolContext) -> ToolResult:
        return ToolResult(content=f"workflow: {SPAWNED_BY_RUNNER}", is_error=True)
