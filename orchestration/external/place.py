"""Where an external agent's turn runs it: the conversation's container when its workspace is
Docker, else the sandbox on this worker (acp_bridge.places).

A container is the boundary there as for every command in it: the agent runs inside with the
profile's environment, and the profile's host-side settings (`readonly` host paths, the
sandbox's network) do not apply; the container's own network mode (the team policy's) does.
Before the agent starts, what a dead runner left running in the container (its agent, the
agent's terminals) is killed, as a native slice does before its first command.

On this worker the command is what the sandbox already shows (workspaces.mounts.command_in_view:
the system dirs, the site's CANVAS_SANDBOX_READONLY_PATHS and a *site* profile's `readonly`),
found there and never along the profile's PATH, and run by that absolute path; a team's
profile has no `readonly`, so nothing a team writes adds a mount. A command the sandbox does not
show (a directory, a file in the workspace, a link out of the view) is an error naming it.
"""

from __future__ import annotations

from dataclasses import dataclass

from acp_bridge.places import AgentPlace
from acp_bridge.profiles import AcpProfile
from conversations.models import Conversation
from teams.policies import EffectivePolicy
from workspaces.base import WorkspaceUnavailable
from workspaces.mounts import CommandRefused, command_in_view
from workspaces.spec import spec_of

from ..workspace import workspace_of


@dataclass(frozen=True)
class PlaceChoice:
    place: AgentPlace | None = None
    """None: the sandbox on this worker (the driver's default)."""
    command: str = ""
    """What to run: the profile's command resolved in the sandbox's view, or as written for a
    container (its image's PATH finds it)."""
    readonly: tuple[str, ...] = ()
    """Host paths the sandbox shows read-only besides the site's: a site profile's own."""
    error: str | None = None
    """Why the agent cannot run where its conversation's workspace is (no engine, no image)."""


def in_container(conversation: Conversation) -> bool:
    return spec_of(conversation.workspace_spec).kind == "docker"


def site_readonly(profile: AcpProfile) -> tuple[str, ...]:
    """The profile's `readonly` when the site wrote it; a team's or a preset's shows nothing."""
    return profile.readonly if profile.source == "site" else ()


def agent_place(
    conversation: Conversation, *, policy: EffectivePolicy, profile: AcpProfile
) -> PlaceChoice:
    if not in_container(conversation):
        readonly = site_readonly(profile)
        try:
            command = command_in_view(profile.command, readonly=readonly)
        except CommandRefused as exc:
            return PlaceChoice(error=f"The agent profile {profile.name!r}: {exc}.")
        return PlaceChoice(command=command, readonly=readonly)
    from acp_bridge.places import ContainerPlace

    workspace = workspace_of(conversation, policy=policy)
    try:
        workspace.stop_leftovers()
        workspace.ensure_container()  # type: ignore[attr-defined]  # a DockerWorkspace
    except (WorkspaceUnavailable, OSError) as exc:  # the engine's API errors are OSErrors
        return PlaceChoice(error=f"The agent's container cannot run: {exc}")
    place = ContainerPlace(workspace)  # type: ignore[arg-type]
    return PlaceChoice(place=place, command=profile.command)
