"""Where an external agent's turn runs it: the conversation's container when its workspace is
Docker, else the sandbox on this worker (acp_bridge.places).

A container is the boundary there as for every command in it: the agent runs inside with the
profile's environment, and the profile's host-side settings (`readonly` host paths, the
sandbox's network) do not apply; the container's own network mode (the team policy's) does.
Before the agent starts, what a dead runner left running in the container (its agent, the
agent's terminals) is killed, as a native slice does before its first command.

On this worker the command is what the sandbox already shows (workspaces.mounts.command_in_view:
the system dirs, the site's CANVAS_SANDBOX_READONLY_PATHS and a *site* profile's `readonly`),
found there and never along the profile's PATH, and run by that absolute path. A team's
profile adds only `readonly` paths inside the site's CANVAS_ACP_TEAM_READONLY_PATHS and a
network of CANVAS_ACP_TEAM_NETWORKS (acp_bridge.profiles.granted, judged again here against the
site's settings as they are now), so nothing a team writes adds a mount the site did not offer.
A command the sandbox does not show (a directory, a file in the workspace, a link out of the
view) is an error naming it.
"""

from __future__ import annotations

from dataclasses import dataclass

from acp_bridge.places import AgentPlace
from acp_bridge.profiles import AcpProfile, AcpProfileValueError, granted
from conversations.models import Conversation
from teams.policies import EffectivePolicy
from workspaces.base import WorkspaceUnavailable
from workspaces.mounts import CommandRefused, command_in_view
from workspaces.sandbox import Network, effective_network
from workspaces.spec import spec_of

from ..workspace import workspace_of
from .environment import agent_path


@dataclass(frozen=True)
class PlaceChoice:
    place: AgentPlace | None = None
    """None: the sandbox on this worker (the driver's default)."""
    command: str = ""
    """What to run: the profile's command resolved in the sandbox's view, or as written for a
    container (its image's PATH finds it)."""
    readonly: tuple[str, ...] = ()
    """Host paths the sandbox shows read-only besides the site's: the profile's own, as the
    site lets it grant them."""
    network: Network = "none"
    """The sandbox's network for the agent (agent_network)."""
    error: str | None = None
    """Why the agent cannot run where its conversation's workspace is (no engine, no image)."""


def in_container(conversation: Conversation) -> bool:
    return spec_of(conversation.workspace_spec).kind == "docker"


def agent_network(granted_network: str, policy: EffectivePolicy) -> Network:
    """The network the agent's sandbox gets: "host" only where the team's policy has the
    host's network (and the site allows it); "outbound" whatever the policy, since it reaches
    only what the outbound guard lets through (the model's API, never the host's loopback or
    private ranges unless the site lists them); else none."""
    if granted_network == "host" and policy.network != "host":
        return "none"
    return effective_network(granted_network)


def agent_place(
    conversation: Conversation, *, policy: EffectivePolicy, profile: AcpProfile
) -> PlaceChoice:
    if not in_container(conversation):
        try:
            readonly, network = granted(profile)
        except AcpProfileValueError as exc:
            return PlaceChoice(error=f"The agent profile {profile.name!r}: {exc}")
        try:
            command = command_in_view(profile.command, readonly=readonly, path=agent_path(profile))
        except CommandRefused as exc:
            return PlaceChoice(error=f"The agent profile {profile.name!r}: {exc}.")
        return PlaceChoice(
            command=command, readonly=readonly, network=agent_network(network, policy)
        )
    from acp_bridge.places import ContainerPlace

    workspace = workspace_of(conversation, policy=policy)
    try:
        workspace.stop_leftovers()
        workspace.ensure_container()  # type: ignore[attr-defined]  # a DockerWorkspace
    except (WorkspaceUnavailable, OSError) as exc:  # the engine's API errors are OSErrors
        return PlaceChoice(error=f"The agent's container cannot run: {exc}")
    place = ContainerPlace(workspace)  # type: ignore[arg-type]
    return PlaceChoice(place=place, command=profile.command)
