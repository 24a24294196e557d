"""Where an external agent runs, and so where its terminals run and how its paths read.

`AcpSession.start` takes one `AgentPlace`; nothing else in the bridge asks which it is.
- `SandboxPlace`: on this worker, under the host sandbox (`process.LocalChild`, terminals via
  `terminals.Terminal`); the agent sees the workspace at its host path.
- `ContainerPlace`: in the conversation's Docker container (`container.ContainerChild`,
  terminals via `container_terminals.ContainerTerminal`); the agent sees the workspace at
  /workspace, the bind mount of the same host directory.

Either way the client serves fs/* from the host directory (`root`), translating the paths the
agent sends from `agent_root`, and confined to it (client.resolve_inside).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from acp_bridge.process import AgentChild, LocalChild
from acp_bridge.terminals import ExitStatus, Terminal
from workspaces import sandbox

if TYPE_CHECKING:
    from workspaces.docker import DockerWorkspace  # docker-py: only when a container is used


class AgentTerminal(Protocol):
    def output(self) -> tuple[str, bool, ExitStatus | None]:
        """Text so far, whether it was truncated, and the exit status once it has ended."""
        ...

    async def wait(self) -> ExitStatus: ...

    def kill(self) -> None:
        """Kill its whole group; may block briefly (call it through a thread)."""
        ...

    async def release(self) -> None: ...


class AgentPlace(Protocol):
    root: Path
    """The workspace on this worker (its real path): fs requests are served from here."""
    agent_root: str
    """The same directory as the agent sees it: its cwd and the root of the paths it sends."""

    async def spawn(
        self, command: str, args: Sequence[str], *, env: Mapping[str, str], cwd: Path,
        limit: int,
    ) -> AgentChild:  # fmt: skip
        """Start the agent in `cwd` (a host path inside root). AgentCrashed when it cannot."""
        ...

    async def start_terminal(
        self, *, command: str, args: Sequence[str], env: Mapping[str, str], cwd: Path,
        output_byte_limit: int | None,
    ) -> AgentTerminal:  # fmt: skip
        ...

    def file_owner(self) -> tuple[int, int] | None:
        """Who must own files the client creates for the agent (None: as they are made)."""
        ...


class SandboxPlace:
    def __init__(
        self, root: Path, *, readonly: Sequence[Path] = (), network: sandbox.Network = "none",
        home: Path | None = None,
    ) -> None:  # fmt: skip
        """`home`: the agent's private home (the caller's: made and removed by it); None
        makes a temporary one, removed when the agent ends (acp_bridge.process)."""
        self.root = Path(os.path.realpath(root))
        self.agent_root = str(self.root)  # the sandbox mounts the workspace at its own path
        self._workspace = root  # as given: the agent's cwd is named below it
        self._readonly = tuple(readonly)
        self._network = network
        self._home = home

    async def spawn(
        self, command: str, args: Sequence[str], *, env: Mapping[str, str], cwd: Path,
        limit: int,
    ) -> AgentChild:  # fmt: skip
        return await LocalChild.spawn(
            command, args, env=env, cwd=cwd, workspace=self._workspace, readonly=self._readonly,
            network=self._network, limit=limit, home=self._home,
        )  # fmt: skip

    async def start_terminal(
        self, *, command: str, args: Sequence[str], env: Mapping[str, str], cwd: Path,
        output_byte_limit: int | None,
    ) -> AgentTerminal:  # fmt: skip
        return await Terminal.start(
            command=command, args=args, env=env, cwd=cwd, root=self.root,
            output_byte_limit=output_byte_limit,
        )  # fmt: skip

    def file_owner(self) -> tuple[int, int] | None:
        return None


class ContainerPlace:
    def __init__(self, workspace: DockerWorkspace) -> None:
        from workspaces.docker import CONTAINER_ROOT

        self.workspace = workspace
        self.root = Path(os.path.realpath(workspace.root))
        self.agent_root = CONTAINER_ROOT

    def agent_path(self, path: Path) -> str:
        """`path` (a host path inside root) as the container sees it."""
        relative = path.relative_to(self.root)
        return self.agent_root if relative == Path(".") else f"{self.agent_root}/{relative}"

    async def spawn(
        self, command: str, args: Sequence[str], *, env: Mapping[str, str], cwd: Path,
        limit: int,
    ) -> AgentChild:  # fmt: skip
        from acp_bridge.container import ContainerChild

        return await ContainerChild.spawn(
            self.workspace, command, args, env=env, cwd=self.agent_path(cwd), limit=limit
        )

    async def start_terminal(
        self, *, command: str, args: Sequence[str], env: Mapping[str, str], cwd: Path,
        output_byte_limit: int | None,
    ) -> AgentTerminal:  # fmt: skip
        from acp_bridge.container_terminals import ContainerTerminal

        return await ContainerTerminal.start(
            self.workspace, command=command, args=args, env=env, cwd=self.agent_path(cwd),
            output_byte_limit=output_byte_limit,
        )  # fmt: skip

    def file_owner(self) -> tuple[int, int] | None:
        return self.workspace.file_owner()
