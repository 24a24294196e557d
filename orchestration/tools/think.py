"""The think tool: a place for the model to reason without acting."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from orchestration.tools.base import ToolArgs, ToolContext, ToolResult


class ThinkArgs(ToolArgs):
    thought: str = Field(description="Your reasoning, plan or notes, in as much detail as helps.")


class ThinkTool:
    name: ClassVar[str] = "think"
    description: ClassVar[str] = (
        "Think something through without changing anything: plan the next steps, weigh possible "
        "causes of a bug, or sort out what the results so far mean. The thought is recorded in "
        "the conversation; nothing else happens."
    )
    args_model: ClassVar[type[ToolArgs]] = ThinkArgs
    read_only: ClassVar[bool] = True

    def run(self, args: ThinkArgs, ctx: ToolContext) -> ToolResult:
        return ToolResult(content="Your thought has been logged.")
