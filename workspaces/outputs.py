"""A command's whole output, kept in the workspace when it is too long for its observation.

The observation keeps the head and the tail (workspaces.local's bounded text); the first time
a command prints past that limit, everything it printed so far and everything after goes to
a file in the workspace's output area, `.agent-outputs/` (at most SPOOL_MAX_BYTES per command;
the rest is counted, not kept). The observation names the file and its line count, so the
agent reads the middle with its own tools, and the page links to it. The area holds the
latest KEEP_FILES outputs; older ones are removed when a new one starts. It is left out of the
Changes panel (workspaces.baseline): it is ours, not the agent's work.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import uuid
from pathlib import Path
from typing import IO

from workspaces import fs
from workspaces.base import WorkspacePathError

OUTPUTS_DIR = ".agent-outputs"
OUTPUT_NAME = re.compile(r"^\d{8}T\d{6}-[0-9a-f]{8}\.log$")
"""An output file's name: when it started, and a random part."""
SPOOL_MAX_BYTES = 32 * 1024 * 1024
KEEP_FILES = 50


class OutputSpool:
    """Where one command's output goes once it is too long; opened on first use."""

    def __init__(self, root: Path, shown_root: str, owner: tuple[int, int] | None = None) -> None:
        self._root = root
        self._shown_root = shown_root.rstrip("/")
        self._owner = owner
        self.name = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}.log"
        self._file: IO[bytes] | None = None
        self.bytes = 0
        self.newlines = 0
        self._open_line = False
        """Whether the text so far ends inside a line (it counts as one more)."""
        self.cut_bytes = 0
        self.failed = False

    @property
    def relative(self) -> str:
        return f"{OUTPUTS_DIR}/{self.name}"

    @property
    def shown(self) -> str:
        """The file's path as the agent sees it (its workspace root, then the area)."""
        return f"{self._shown_root}/{self.relative}"

    @property
    def lines(self) -> int:
        return self.newlines + self._open_line

    @property
    def started(self) -> bool:
        return self._file is not None

    def _open(self) -> IO[bytes] | None:
        # By handle (workspaces.fs): the agent may swap the area for a link at any moment.
        try:
            with fs.open_dir(self._root, [OUTPUTS_DIR], create=True) as area:
                _prune(area)
                fd = fs.create_file_at(area, self.name, self.relative, mode=0o644)
                if self._owner is not None:
                    with contextlib.suppress(OSError):
                        os.fchown(fd, *self._owner)
                        os.fchown(area, *self._owner)
                return os.fdopen(fd, "wb")
        except (OSError, WorkspacePathError):
            self.failed = True  # the observation still has head and tail; say nothing more
            return None

    def write(self, text: str) -> None:
        if self.failed:
            return
        if self._file is None:
            self._file = self._open()
            if self._file is None:
                return
        data = text.encode("utf-8", "replace")
        self.newlines += text.count("\n")
        if text:
            self._open_line = not text.endswith("\n")
        room = SPOOL_MAX_BYTES - self.bytes
        if len(data) > room:
            self.cut_bytes += len(data) - max(room, 0)
            data = data[: max(room, 0)]
        if data:
            try:
                self._file.write(data)
            except OSError:
                self.failed = True
                return
            self.bytes += len(data)

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()

    def note(self, dropped_chars: int) -> str:
        """The line the observation holds where its middle was cut."""
        if not self.started or self.failed:
            return f"[... {dropped_chars} characters cut ...]"
        kept = f"the whole output ({self.lines} lines) is in {self.shown}"
        if self.cut_bytes:
            kept += f" (its first {SPOOL_MAX_BYTES // (1024 * 1024)} MiB)"
        return (
            f"[... {dropped_chars} characters cut; {kept}: read the middle with "
            f"`sed -n 'FROM,TOp' {self.shown}` or the file editor's view_range ...]"
        )


def _prune(area: int) -> None:
    """Keep the newest KEEP_FILES - 1 outputs in the open area, making room for the one being
    opened."""
    try:
        with os.scandir(area) as it:
            entries = [e for e in it if e.is_file(follow_symlinks=False)]
    except OSError:
        return

    def age(entry: os.DirEntry) -> tuple[int, str]:
        try:
            return entry.stat(follow_symlinks=False).st_mtime_ns, entry.name
        except OSError:
            return 0, entry.name

    entries.sort(key=age, reverse=True)  # newest first (names share a second)
    for entry in entries[KEEP_FILES - 1 :]:
        with contextlib.suppress(OSError):
            os.unlink(entry.name, dir_fd=area)
