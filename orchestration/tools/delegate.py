"""The delegate tool: several named sub-agents at once, in parallel on any workers.

Carried out by the runner (orchestration.subagents.parent); the result lists each child's
name, status and answer once all of them have ended.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator

from orchestration.tools.base import ToolArgs, ToolContext, ToolResult
from orchestration.tools.task import SPAWNED_BY_RUNNER


class DelegatedTask(ToolArgs):
    name: str = Field(
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9 _.-]*$",
        description="A short unique name for this task (letters, digits, space, _ . -).",
    )
    prompt: str = Field(min_length=1, max_length=100_000, description="The task, in full.")
    subagent_type: str = Field(default="general", max_length=64)


class DelegateArgs(ToolArgs):
    tasks: list[DelegatedTask] = Field(min_length=1, max_length=100)

    @field_validator("tasks")
    @classmethod
    def _unique_names(cls, tasks: list[DelegatedTask]) -> list[DelegatedTask]:
        names = [t.name for t in tasks]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"task names must be unique; repeated: {', '.join(repeated)}")
        return tasks


class DelegateTool:
    name: ClassVar[str] = "delegate"
    description: ClassVar[str] = (
        "Start several sub-agents in parallel, one per named task, and wait until all have "
        "ended; the result lists each task's name, status and answer. Give each task "
        "everything it needs: sub-agents see only their own prompt and the shared workspace. "
        "Use it for independent pieces of work that can run at the same time."
    )
    args_model: ClassVar[type[ToolArgs]] = DelegateArgs
    read_only: ClassVar[bool] = True

    def run(self, args: DelegateArgs, ctx: ToolContext) -> ToolResult:
        return ToolResult(content=f"delegate: {SPAWNED_BY_RUNNER}", is_error=True)
