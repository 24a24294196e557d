"""The Workspace protocol: where a conversation's tools act.

A workspace is addressed by a root directory (what the agent sees) and a state directory
(what the runtime remembers between commands: cwd, exported environment, edit history). Both
live on disk, so consecutive steps of a conversation may run in different worker processes.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class WorkspacePathError(ValueError):
    """A path resolved outside the workspace root (via '..', an absolute path, or a symlink)."""


@dataclass(frozen=True, slots=True)
class CommandResult:
    output: str
    """Combined stdout and stderr, cut to head + tail with a marker when too long."""
    exit_code: int | None
    """None when the command did not finish (timed out or interrupted)."""
    timed_out: bool = False
    truncated: bool = False
    interrupted: bool = False
    """Stopped on request (Interrupt) before it finished."""


class Workspace(Protocol):
    root: Path

    def resolve(self, path: str) -> Path:
        """Absolute path inside root for `path` (relative to the current directory or root).

        Raises WorkspacePathError when it lands outside root.
        """
        ...

    def run(
        self,
        command: str,
        *,
        timeout: float,
        extra_env: Mapping[str, str] | None = None,
        cancel: threading.Event | None = None,
    ) -> CommandResult:
        """Run a shell command. `extra_env` is set for this command only: never saved with the
        environment that carries over to later commands. Setting `cancel` stops it."""
        ...

    def read_text(self, path: str) -> str: ...

    def write_text(self, path: str, content: str) -> Path: ...

    def state_path(self, name: str) -> Path:
        """A file in the workspace's private state directory (never visible to the agent)."""
        ...

    def stop_leftovers(self) -> int:
        """Kill what commands a previous runner left running, before anything else runs;
        returns how many it stopped."""
        ...
