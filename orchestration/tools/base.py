"""What a tool is: a name, a Pydantic argument model, a read-only flag and a run function.

Tools receive already-validated arguments; turning a model's raw call into those (and every
way that can fail) is the loop's job, so each tool only does its one thing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from workspaces.base import Workspace


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True, slots=True)
class ToolResult:
    content: str
    is_error: bool = False
    exit_code: int | None = None
    finish: bool = False
    """True when the run should end after this result (the finish tool)."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    conversation_id: str
    workspace: Workspace


class Tool(Protocol):
    name: ClassVar[str]
    description: ClassVar[str]
    args_model: ClassVar[type[ToolArgs]]
    read_only: ClassVar[bool]

    def run(self, args: Any, ctx: ToolContext) -> ToolResult: ...


def tool_schema(tool: Tool) -> dict[str, Any]:
    """The OpenAI/LiteLLM function-calling schema for a tool."""
    parameters = tool.args_model.model_json_schema()
    parameters.pop("title", None)
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": parameters},
    }
