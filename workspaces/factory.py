"""The one place that turns a conversation's stored WorkspaceSpec into a workspace.

Every caller (the runner, the web process's readings, run control, deletion) gets its
workspace here, so nothing else asks which kind it is. Both kinds keep their files in the same
host directory (the conversation's own, or the one it was given), so the Changes, Files and
archive readings are the same code for both; they differ in where commands run:
- local: workspaces.local, commands through the bubblewrap sandbox on the worker;
- docker: workspaces.docker, one container per conversation with the directory bind-mounted.

Every workspace made here also has `pause`, `resume` and `close` (Lifecycle): a container is
frozen, thawed, removed; a local directory has nothing running between commands, so for it
they do nothing.

Network: the policy's "none" is none for both kinds. "host" means the host's network for the
sandbox and Docker's default "bridge" network for a container, and either only where the site
allows it (CANVAS_SANDBOX_ALLOW_HOST_NETWORK, workspaces.sandbox.effective_network); a
container never shares the host's own network namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from workspaces.base import Workspace
from workspaces.local import LocalWorkspace
from workspaces.sandbox import effective_network
from workspaces.sources import source_fill
from workspaces.spec import ContainerLimits, WorkspaceSpec

if TYPE_CHECKING:
    from workspaces.docker import DockerWorkspace


class Lifecycle(Protocol):
    def pause(self) -> None:
        """Freeze what runs in the workspace (the conversation was paused)."""
        ...

    def resume(self) -> None: ...

    def close(self) -> None:
        """Remove what runs the workspace's commands; its files stay."""
        ...


class ManagedWorkspace(Workspace, Lifecycle, Protocol):
    pass


class PlainWorkspace(LocalWorkspace):
    """A local workspace: no process lives between its commands, so its lifecycle is empty."""

    def pause(self) -> None:
        pass

    def resume(self) -> None:
        pass

    def close(self) -> None:
        pass


NO_LIMITS = ContainerLimits()


def workspace_dirs(conversation_id: str, workspace_path: str | None) -> tuple[Path, Path]:
    """(root, state directory) of a conversation: its own folder unless it was given one."""
    from django.conf import settings

    if not conversation_id or conversation_id in {".", ".."} or "/" in conversation_id:
        raise ValueError(f"invalid conversation id {conversation_id!r}")
    root = (
        Path(workspace_path)
        if workspace_path
        else settings.CANVAS_WORKSPACES_ROOT / conversation_id
    )
    return root, settings.CANVAS_STATE_ROOT / conversation_id


def workspace_for(
    conversation_id: str,
    workspace_path: str | None,
    *,
    spec: WorkspaceSpec,
    team_id: int,
    network: str = "none",
    limits: ContainerLimits = NO_LIMITS,
    env: Mapping[str, str] | None = None,
) -> ManagedWorkspace:
    """The conversation's workspace of the kind its spec names. `network` is the team
    policy's ("none" or "host", see the module docstring); `limits` apply to containers."""
    root, state_dir = workspace_dirs(conversation_id, workspace_path)
    allowed = effective_network(network)
    if spec.kind == "docker":
        return _docker(
            root, state_dir, conversation_id=conversation_id, team_id=team_id, spec=spec,
            network="bridge" if allowed == "host" else "none", limits=limits, env=env,
        )  # fmt: skip
    return PlainWorkspace(root, state_dir, network=allowed, env=env)


def _docker(
    root: Path,
    state_dir: Path,
    *,
    conversation_id: str,
    team_id: int,
    spec: WorkspaceSpec,
    network: str,
    limits: ContainerLimits,
    env: Mapping[str, str] | None,
) -> DockerWorkspace:
    from django.conf import settings

    from workspaces.docker import DockerWorkspace  # docker-py: only when used

    return DockerWorkspace(
        root, state_dir, conversation_id=conversation_id, team_id=team_id,
        image=spec.image or settings.CANVAS_DOCKER_IMAGE,
        limits=limits,
        network=network, env=env,
    )  # fmt: skip


def kind_unavailable(kind: str) -> str | None:
    """Why workspaces of `kind` cannot be made here (for people), or None when they can."""
    if kind != "docker":
        return None
    try:
        from workspaces.docker import docker_available
    except ImportError as exc:  # docker-py missing from this installation
        return f"Docker support is not installed ({exc.name})."
    return docker_available()


def workspace_fill(workspace: Workspace, spec: WorkspaceSpec) -> bool:
    """Fill a new workspace from its spec's git source, once (workspaces.sources); True when
    this call did. Call before the baseline is taken. Raises SourceError."""
    from django.conf import settings

    return source_fill(
        workspace.root, workspace.state_path("source.json").parent, spec.source,
        named=settings.CANVAS_GIT_REPOS, local_roots=settings.CANVAS_GIT_LOCAL_ROOTS,
    )  # fmt: skip
