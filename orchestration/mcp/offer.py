"""The servers' side of a slice that has MCP servers (orchestration.mcp.slice decides whether
it has any): start them, or take back the connections the run's previous slice left in this
process (orchestration.mcp.pool), and add their tools to the runner's; when the slice ends,
leave them for the next slice if the run goes on, else close every session and kill every
server process.

This module holds the imports of the MCP SDK and of the ACP SDK's process bridge (over a
second of CPU), so a run with no server never loads it (tests/test_start_imports.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from django.conf import settings

from conversations.events import AgentErrorEvent, RunStartedEvent, Status
from workspaces.sandbox import effective_network

from ..chain.workers import draining
from .launch import LaunchError, ServerLaunch, server_launch
from .pool import Kept, fingerprint, toolbox_keep, toolbox_take
from .rules import McpServerConfig
from .tool import mcp_tool
from .toolbox import McpToolbox, Unavailable

if TYPE_CHECKING:
    from ..step.runner import SliceRunner

UNAVAILABLE = "mcp_unavailable"
_BAD_NAME = (
    "The MCP server {server!r} offers a tool {name!r} whose name no model accepts (letters, "
    "digits, _ and -, 64 in all with its mcp__SERVER__ prefix); that tool is left out."
)


def _message(failure: Unavailable) -> str:
    return (
        f"The MCP server {failure.server!r} was skipped: {failure.reason}. Its tools are not "
        "available to the agent in this part of the run."
    )


def _already_said(runner: SliceRunner, message: str) -> bool:
    for event in reversed(runner.history.events):
        warning = isinstance(event, AgentErrorEvent) and event.code == UNAVAILABLE
        if warning and event.message == message:
            return True
        if isinstance(event, RunStartedEvent):
            return False
    return False


def _launches(
    runner: SliceRunner, configs: list[McpServerConfig]
) -> tuple[list[ServerLaunch], list[Unavailable]]:
    network = effective_network(runner.limits.policy.network)
    launches, failed = [], []
    where = {"secrets": runner.ctx.secrets, "workspace": runner.workspace_root, "network": network,
             "conversation_id": runner.conversation_id}  # fmt: skip
    for config in configs:
        try:
            launches.append(server_launch(config, **where))
        except LaunchError as exc:
            failed.append(Unavailable(config.name, str(exc)))
    return launches, failed


def _allowed(runner: SliceRunner, name: str) -> bool:
    """The policy allows the tool, and so does the agent's own list (a sub-agent's)."""
    wanted = runner.config.mcp_tools
    return runner.limits.tool_allowed(name) and (wanted is None or name in wanted)


@contextmanager
def servers_offered(runner: SliceRunner, configs: list[McpServerConfig]) -> Iterator[None]:
    """Offer the tools of the servers `configs` names to `runner` for the duration of the
    block (the workspace is ready for them: orchestration.mcp.slice)."""
    launches, failed = _launches(runner, configs)
    launched_as = fingerprint(launches)
    kept = toolbox_take(runner.conversation_id, launched_as)
    fresh = kept is None
    if kept is None:
        kept = Kept(McpToolbox(), [], launched_as)
    healthy = False
    try:
        if fresh and launches:
            listed, unreachable = kept.toolbox.open(launches, cancel=runner.cancel)
            kept.listed, failed = listed, failed + unreachable
        _offer(runner, kept, failed)
        yield
        healthy = not failed
    finally:
        if healthy and _run_goes_on(runner):
            toolbox_keep(runner.conversation_id, kept)
        else:
            kept.toolbox.close()


def _offer(runner: SliceRunner, kept: Kept, failed: list[Unavailable]) -> None:
    messages = [_message(failure) for failure in failed]
    for item in kept.listed:
        tool = mcp_tool(item, kept.toolbox)
        if tool is None:
            messages.append(_BAD_NAME.format(server=item.server, name=item.name))
        elif tool.name not in runner.tools and _allowed(runner, tool.name):
            runner.tools[tool.name] = tool
            runner.schemas.append(tool.schema())
            runner.mcp_tool_names.append(tool.name)
    warnings = [
        AgentErrorEvent(code=UNAVAILABLE, message=message)
        for message in messages
        if not _already_said(runner, message)
    ]
    if warnings:
        runner.append(warnings)


def _run_goes_on(runner: SliceRunner) -> bool:
    """The slice handed the run over to the next one: keep the servers for it (pool.py)."""
    return (
        settings.CANVAS_MCP_KEEP_SECONDS > 0
        and runner.history.state.status == Status.RUNNING
        and not runner.cancel.is_set()
        and not draining.is_set()
    )
