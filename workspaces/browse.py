"""Looking at a workspace's files from outside the sandbox, read-only and confined to it.

A path is relative to the workspace root and walked one component at a time from a descriptor
of the root, each step opened with O_NOFOLLOW: `..`, absolute paths and symbolic links are
refused wherever they appear, and the agent cannot swap a folder for a link between a check
and the open that follows it (there is no check apart from the open). A file is opened
non-blocking and must be a regular file, so a FIFO the agent made cannot hang the web process.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from workspaces.base import DirEntry, EntryKind, FileView, WorkspacePathError

MAX_VIEW_BYTES = 512 * 1024
MAX_ENTRIES = 5000
"""A listing stops here; the rest of a huge folder is left out."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def parts_of(path: str) -> list[str]:
    """The components of a root-relative path; WorkspacePathError when it could leave root."""
    if "\0" in path:
        raise WorkspacePathError("path contains a NUL byte")
    if path.startswith("/"):
        raise WorkspacePathError(f"path {path!r} must be relative to the workspace")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise WorkspacePathError(f"path {path!r} may not contain '..'")
    return parts


@contextlib.contextmanager
def _open_dir(root: Path, parts: list[str]) -> Iterator[int]:
    """A descriptor of the directory root/parts, never through a symbolic link."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, part in enumerate(parts):
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise _refusal(exc, fd, part, "/".join(parts[: i + 1])) from None
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _refusal(exc: OSError, parent: int, name: str, shown: str) -> OSError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        with contextlib.suppress(OSError):
            if stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
                return WorkspacePathError(f"{shown!r} is a symbolic link; links are not followed")
        if exc.errno == errno.ENOTDIR:
            return NotADirectoryError(errno.ENOTDIR, "not a directory", shown)
    if exc.errno == errno.ENOENT:
        return FileNotFoundError(errno.ENOENT, "no such file or directory", shown)
    return exc


def list_files(root: Path, path: str) -> list[DirEntry]:
    with _open_dir(root, parts_of(path)) as fd:
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
    with _open_dir(root, parts[:-1]) as parent:
        try:
            fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=parent)
        except OSError as exc:
            raise _refusal(exc, parent, parts[-1], "/".join(parts)) from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        shown = "/".join(parts)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", shown)
        if not stat.S_ISREG(info.st_mode):
            raise WorkspacePathError(f"{shown!r} is not a regular file")
        if info.st_size > MAX_VIEW_BYTES:
            return FileView(shown, info.st_size, None, f"too large to show ({info.st_size} bytes)")
        data = f.read(MAX_VIEW_BYTES + 1)
    try:
        if b"\0" in data:
            raise UnicodeDecodeError("utf-8", data, 0, 1, "NUL byte")
        return FileView(shown, len(data), data.decode("utf-8"), None)
    except UnicodeDecodeError:
        return FileView(shown, len(data), None, f"binary file ({len(data)} bytes)")
