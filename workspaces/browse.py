"""Looking at a workspace's files from outside the sandbox, read-only and confined to it:
the listing and file views people (the Files tab, the API) and prompts (AGENTS.md, skills,
agent definitions) read. Every open goes through workspaces.fs, so `..`, absolute paths and
symbolic links are refused wherever they appear, and a FIFO cannot hang the web process.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from workspaces.base import DirEntry, EntryKind, FileView
from workspaces.fs import open_dir, open_file_at, parts_of

__all__ = ["list_files", "parts_of", "read_file"]

MAX_VIEW_BYTES = 512 * 1024
MAX_ENTRIES = 5000
"""A listing stops here; the rest of a huge folder is left out."""


def list_files(root: Path, path: str) -> list[DirEntry]:
    with open_dir(root, parts_of(path)) as fd:
        entries = []
        with os.scandir(fd) as it:
            for entry in it:
                if len(entries) >= MAX_ENTRIES:
                    break
                entries.append(_entry(entry))
    return sorted(entries, key=lambda e: (e.kind != "dir", e.name))


def _entry(entry: os.DirEntry) -> DirEntry:
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return DirEntry(entry.name, "other", None)
    kind: EntryKind = (
        "dir" if stat.S_ISDIR(info.st_mode)
        else "file" if stat.S_ISREG(info.st_mode)
        else "symlink" if stat.S_ISLNK(info.st_mode)
        else "other"
    )  # fmt: skip
    return DirEntry(entry.name, kind, info.st_size if kind == "file" else None)


def read_file(root: Path, path: str) -> FileView:
    parts = parts_of(path)
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "is a directory", path)
    shown = "/".join(parts)
    with open_dir(root, parts[:-1]) as parent:
        fd = open_file_at(parent, parts[-1], shown)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if info.st_size > MAX_VIEW_BYTES:
            return FileView(shown, info.st_size, None, f"too large to show ({info.st_size} bytes)")
        data = f.read(MAX_VIEW_BYTES + 1)
    try:
        if b"\0" in data:
            raise UnicodeDecodeError("utf-8", data, 0, 1, "NUL byte")
        return FileView(shown, len(data), data.decode("utf-8"), None)
    except UnicodeDecodeError:
        return FileView(shown, len(data), None, f"binary file ({len(data)} bytes)")
