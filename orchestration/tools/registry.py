"""Tools by name: the one place that knows which tool classes exist."""

from __future__ import annotations

from collections.abc import Iterable

from orchestration.step.agent import DEFAULT_TOOLS as DEFAULT_TOOLS
from orchestration.tools.base import Tool
from orchestration.tools.delegate import DelegateTool
from orchestration.tools.file_editor import FileEditorTool
from orchestration.tools.finish import FinishTool
from orchestration.tools.invoke_skill import InvokeSkillTool
from orchestration.tools.task import TaskTool
from orchestration.tools.terminal import TerminalTool
from orchestration.tools.think import ThinkTool
from orchestration.tools.workflow import WorkflowTool

# Tools hold no state, so one shared instance of each serves every conversation.
_TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        TerminalTool(), FileEditorTool(), ThinkTool(), FinishTool(), TaskTool(), DelegateTool(),
        WorkflowTool(), InvokeSkillTool(),
    )
}  # fmt: skip


def get_tool(name: str) -> Tool | None:
    return _TOOLS.get(name)


def tools_for(names: Iterable[str]) -> list[Tool]:
    """The tools with these names, in order; raises KeyError naming any unknown tool."""
    names = list(names)
    unknown = [name for name in names if name not in _TOOLS]
    if unknown:
        raise KeyError(f"unknown tools: {', '.join(unknown)}")
    return [_TOOLS[name] for name in names]
