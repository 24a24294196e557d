"""One MCP server's tool as one of our agent's tools: named mcp__SERVER__TOOL, described and
shaped by the server (its input schema as the function's parameters), plus our required
`security_risk`, since any server's tool may change things: its calls are assessed and held for
approval like the terminal's. A server's own read-only hint is not trusted for that.

The arguments are passed to the server as the model wrote them (minus `security_risk`, which
the loop strips); the server validates them against its schema, and its refusal is an error
observation the model reads.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import ConfigDict

from ..tools.base import (
    SECURITY_RISK_ARGUMENT,
    SECURITY_RISK_SCHEMA,
    ToolArgs,
    ToolContext,
    ToolResult,
)
from .rules import tool_name
from .toolbox import ListedTool, McpToolbox

FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What the model providers accept as a function's name."""
MAX_DESCRIPTION_CHARS = 2000


class McpArgs(ToolArgs):
    """Any JSON object: the server checks it against its own schema."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True, eq=False)
class McpTool:
    name: str
    description: str
    server: str
    remote_name: str
    input_schema: dict[str, Any]
    toolbox: McpToolbox
    args_model: ClassVar[type[ToolArgs]] = McpArgs
    read_only: ClassVar[bool] = False

    def schema(self) -> dict[str, Any]:
        """The function-calling schema (orchestration.tools.base.tool_schema's shape)."""
        parameters = copy.deepcopy(self.input_schema) or {}
        parameters.setdefault("type", "object")
        parameters.setdefault("properties", {})[SECURITY_RISK_ARGUMENT] = SECURITY_RISK_SCHEMA
        required = [r for r in parameters.get("required", []) if r != SECURITY_RISK_ARGUMENT]
        parameters["required"] = [*required, SECURITY_RISK_ARGUMENT]
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }

    def run(self, args: McpArgs, ctx: ToolContext) -> ToolResult:
        arguments = dict(args.model_extra or {})
        return self.toolbox.call(self.server, self.remote_name, arguments, cancel=ctx.cancel)


def mcp_tool(listed: ListedTool, toolbox: McpToolbox) -> McpTool | None:
    """The tool, or None when its name cannot be offered to a model."""
    name = tool_name(listed.server, listed.name)
    if not FUNCTION_NAME.fullmatch(name):
        return None
    description = f"[MCP server {listed.server}] {listed.description}".strip()
    schema = listed.input_schema if isinstance(listed.input_schema, dict) else {}
    return McpTool(
        name=name, description=description[:MAX_DESCRIPTION_CHARS], server=listed.server,
        remote_name=listed.name, input_schema=schema, toolbox=toolbox,
    )  # fmt: skip
