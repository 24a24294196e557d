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
from typing import BinaryIO, Literal, Protocol

ExtraEnv = Mapping[str, str] | None
"""Variables for one command only (a team's secrets): never saved for later commands."""
Cancel = threading.Event | None
"""Set to stop the command (Interrupt)."""


class WorkspaceUnavailable(RuntimeError):
    """Commands cannot run here at all (no sandbox, no Docker engine, a missing image); the
    message says what a person can do about it."""


class WorkspacePathError(ValueError):
    """A path that leaves the workspace root ('..', an absolute path elsewhere, a NUL byte) or
    passes a symbolic link, which host code never follows (workspaces.fs). Safe to show."""


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
    output_file: str | None = None
    """When the output was cut: the file holding all of it, relative to the workspace root
    (workspaces.outputs)."""


ChangeStatus = Literal["added", "modified", "deleted"]


@dataclass(frozen=True, slots=True)
class FileChange:
    """One path that differs from the workspace's baseline."""

    path: str
    status: ChangeStatus
    added: int | None
    """Lines added; None for a binary or large file."""
    removed: int | None


@dataclass(frozen=True, slots=True)
class FileDiff:
    path: str
    status: ChangeStatus
    text: str
    """The unified diff; empty when the change is summarised instead."""
    summary: str | None
    """Why there is no diff to show, with the sizes (a binary or large file)."""


EntryKind = Literal["dir", "file", "symlink", "other"]


@dataclass(frozen=True, slots=True)
class DirEntry:
    name: str
    kind: EntryKind
    size: int | None
    """Bytes, for files."""


@dataclass(frozen=True, slots=True)
class FileView:
    """A file read for showing: its text, or why it is not shown."""

    path: str
    size: int
    text: str | None
    summary: str | None


class Workspace(Protocol):
    root: Path

    def resolve(self, path: str) -> Path:
        """Absolute host path inside root for `path` (relative to the current directory or
        root), for showing: worked out from the text alone (`..` folded), nothing on disk
        followed, so it may name a link. Never open it by name: use `parts` and workspaces.fs.

        Raises WorkspacePathError when it lands outside root.
        """
        ...

    def parts(self, path: str) -> list[str]:
        """`path` as `resolve` reads it, as components under root for workspaces.fs."""
        ...

    def run(
        self, command: str, *, timeout: float, extra_env: ExtraEnv = None, cancel: Cancel = None
    ) -> CommandResult:
        """Run a shell command. `extra_env` is set for this command only: never saved with the
        environment that carries over to later commands. Setting `cancel` stops it."""
        ...

    def read_text(self, path: str) -> str:
        """The file's text (strict UTF-8, line endings as on disk), opened by handle: a link
        anywhere on the way is a WorkspacePathError, never followed."""
        ...

    def as_agent_sees(self, text: str) -> str:
        """`text` about the workspace's files with their paths as the agent's commands see
        them (a container's /workspace rather than the host folder)."""
        ...

    def write_text(self, path: str, content: str, *, exclusive: bool = False) -> Path:
        """Write the file whole by handle (missing folders made; a reader never sees half of
        it), refusing links like `read_text`; returns `resolve(path)`. `exclusive`:
        FileExistsError when the name is taken."""
        ...

    def state_path(self, name: str) -> Path:
        """A file in the workspace's private state directory (never visible to the agent)."""
        ...

    def stop_leftovers(self) -> int:
        """Kill what commands a previous runner left running, before anything else runs;
        returns how many it stopped."""
        ...

    # -- for people looking at the workspace (the web process; nothing here runs agent code) --

    def baseline_take(self) -> bool:
        """Snapshot the workspace as the starting point of `changes` unless one exists; True
        when this call took it. Call before the agent's first command."""
        ...

    def changes(self) -> list[FileChange]:
        """Paths added, modified or deleted since the baseline (empty without one)."""
        ...

    def diff(self, path: str) -> FileDiff:
        """One changed path's unified diff (binary and large files summarised); KeyError when
        `path` did not change."""
        ...

    def list_files(self, path: str) -> list[DirEntry]:
        """The directory `path` (relative to root; "" is root), directories first.

        WorkspacePathError for `..`, absolute paths or a symlink on the way; NotADirectoryError
        when it is a file."""
        ...

    def read_file(self, path: str) -> FileView:
        """The file `path` (relative to root), read-only, confined like `list_files`."""
        ...

    def archive(self, out: BinaryIO) -> None:
        """Write the whole workspace, as it is now, as a tar.gz to `out`."""
        ...
