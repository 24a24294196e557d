"""The MCP side of one slice of our agent's run: before anything runs, connect to the team's
enabled servers that serve the conversation's model profile (or take back the connections the
run's previous slice left in this process, orchestration.mcp.pool) and add their tools to the
runner's; when the slice ends, leave them for the next slice if the run goes on, else close
every session and kill every server process (orchestration.mcp.offer).

A server that cannot be used (a secret it names is missing, its command does not start, it
does not answer, it cannot list its tools, its URL is refused) is left out with an
`agent.error` `mcp_unavailable` naming it and the reason, once per run and reason, and the
run goes on without it. A server's tool the team policy does not allow, that a sub-agent's
definition leaves out (AgentConfig.mcp_tools), or whose name would shadow one of ours, is not
offered.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from conversations.events import Status
from workspaces.factory import workspace_fill
from workspaces.sources import SourceError

from .servers import mcp_servers_for_run

if TYPE_CHECKING:
    from ..step.runner import SliceRunner


def _workspace_ready(runner: SliceRunner) -> bool:
    """What the runner's recovery does first, done before a server starts in the workspace:
    a predecessor's leftovers killed, the git source checked out (into an empty folder), the
    baseline taken (so what a server writes shows as a change). Each happens once; a source
    that fails is left for the recovery to report, and no server starts."""
    workspace = runner.ctx.workspace
    workspace.stop_leftovers()
    try:
        workspace_fill(workspace, runner.workspace_spec)
    except SourceError:
        return False
    workspace.baseline_take()
    return True


@contextmanager
def mcp_tools(runner: SliceRunner) -> Iterator[None]:
    """Offer the team's MCP tools to `runner` for the duration of the block."""
    if runner.history.state.status != Status.RUNNING:
        yield
        return
    configs = mcp_servers_for_run(team_id=runner.team_id, model_profile=runner.config.model)
    if not configs or not _workspace_ready(runner):
        yield
        return
    # Here, not above: the MCP SDK and the ACP SDK's process bridge take over a second to
    # import, which a run with no server (the command line's, most) never pays.
    from .offer import servers_offered

    with servers_offered(runner, configs):
        yield
