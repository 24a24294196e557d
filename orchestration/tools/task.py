"""The task tool: hand one self-contained piece of work to a sub-agent and read its answer.

The runner, not `run`, carries it out (orchestration.subagents.parent): the child is a
conversation of its own, and the parent waits for it without holding a worker.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from orchestration.tools.base import ToolArgs, ToolContext, ToolResult

SPAWNED_BY_RUNNER = "this tool is carried out by the runner, not called directly"


class TaskArgs(ToolArgs):
    subagent_type: str = Field(
        default="general", max_length=64, description="Which kind of sub-agent runs the task."
    )
    prompt: str = Field(
        min_length=1,
        max_length=100_000,
        description=(
            "Everything the sub-agent needs to know: it sees none of this conversation, only "
            "this prompt and the shared workspace."
        ),
    )
    description: str = Field(
        default="", max_length=100, description="A few words naming the task, shown to people."
    )


class TaskTool:
    name: ClassVar[str] = "task"
    description: ClassVar[str] = (
        "Start one sub-agent on a self-contained task and wait for its final answer, which "
        "comes back as this call's result. The sub-agent works in the same workspace with at "
        "most your tools. Use it for work that needs many steps of its own (exploring a code "
        "base, a focused fix) so your own context stays small."
    )
    args_model: ClassVar[type[ToolArgs]] = TaskArgs
    read_only: ClassVar[bool] = True
    """Spawning changes nothing by itself; each child's actions face its own approvals."""

    def run(self, args: TaskArgs, ctx: ToolContext) -> ToolResult:
        return ToolResult(content=f"task: {SPAWNED_BY_RUNNER}", is_error=True)
