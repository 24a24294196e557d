"""Where an external agent's turn runs it: the conversation's container when its workspace is
Docker, else the sandbox on this worker (acp_bridge.places).

A container is the boundary there as for every command in it: the agent runs inside with the
profile's environment, and the profile's host-side settings (`readonly` host paths, the
sandbox's network) do not apply; the container's own network mode (the team policy's) does.
Before the agent starts, what a dead runner left running in the container (its agent, the
agent's terminals) is killed, as a native slice does before its first command.
"""

from __future__ import annotations

from dataclasses import dataclass

from acp_bridge.places import AgentPlace
from conversations.models import Conversation
from teams.policies import EffectivePolicy
from workspaces.base import WorkspaceUnavailable
from workspaces.spec import spec_of

from ..workspace import workspace_of


@dataclass(frozen=True)
class PlaceChoice:
    place: AgentPlace | None = None
    """None: the sandbox on this worker (the driver's default)."""
    error: str | None = None
    """Why the agent cannot run where its conversation's workspace is (no engine, no image)."""


def in_container(conversation: Conversation) -> bool:
    return spec_of(conversation.workspace_spec).kind == "docker"


def agent_place(conversation: Conversation, *, policy: EffectivePolicy) -> PlaceChoice:
    if not in_container(conversation):
        return PlaceChoice()
    from acp_bridge.places import ContainerPlace

    workspace = workspace_of(conversation, policy=policy)
    try:
        workspace.stop_leftovers()
        workspace.ensure_container()  # type: ignore[attr-defined]  # a DockerWorkspace
    except (WorkspaceUnavailable, OSError) as exc:  # the engine's API errors are OSErrors
        return PlaceChoice(error=f"The agent's container cannot run: {exc}")
    return PlaceChoice(place=ContainerPlace(workspace))  # type: ignore[arg-type]
