"""The finish tool: the model's way to end its turn with a final answer."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from orchestration.tools.base import ToolArgs, ToolContext, ToolResult


class FinishArgs(ToolArgs):
    message: str = Field(
        description=(
            "The final answer for the user: what was done, the result, and anything left open "
            "or worth checking."
        )
    )


class FinishTool:
    name: ClassVar[str] = "finish"
    description: ClassVar[str] = (
        "End the task and give the user your final answer. Call it once the work is complete, "
        "or when you cannot go further and need to explain why. Nothing runs after it."
    )
    args_model: ClassVar[type[ToolArgs]] = FinishArgs
    read_only: ClassVar[bool] = True

    def run(self, args: FinishArgs, ctx: ToolContext) -> ToolResult:
        return ToolResult(content=args.message, finish=True)
