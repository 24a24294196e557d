"""The one door through which host code reads and writes inside a workspace.

An agent's commands can change anything in its workspace at any moment, including swapping a
folder for a symbolic link between a host process's check of a path and its open of it
(`renameat2(RENAME_EXCHANGE)` does that atomically). So nothing here checks a path and then
opens it by name: a root-relative path is walked one component at a time from a descriptor of
the workspace root, each step opened relative to the previous one with `O_NOFOLLOW`. A link
anywhere on the way, `..`, an absolute path or a NUL byte is a `WorkspacePathError` with a
message safe to show; a race that swaps a link in mid-walk ends the same way, never in a read
or write outside the root. Files are opened `O_NONBLOCK` and must be regular, so a FIFO the
agent made cannot hang the host.

Writes go to a fresh temporary file in the (already open) parent folder and are renamed over
the target by that folder's descriptor: the target is never opened through a link, a hard link
to it is never written through, and a reader never sees half a file. A file's mode is kept,
and its owner where this process may set it.

Everything that reads or writes workspace content on the host uses this module (the file
editor, fork's copy, the files / diff / archive views, output offload, skills, AGENTS.md, the
ACP fs requests); `workspaces.browse` builds its read-only views on it.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

from workspaces.base import WorkspacePathError

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

Owner = tuple[int, int]
"""(uid, gid) to give what a write creates (a container's user); see `write_owned`."""


class FileTooLarge(ValueError):
    """A file is larger than the caller's limit; `size` says how large."""

    def __init__(self, shown: str, size: int, limit: int) -> None:
        super().__init__(f"{shown!r} is {size} bytes, more than the {limit} allowed here")
        self.size = size


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


def relative_parts(root: Path, path: str, *, cwd: Path | None = None) -> list[str]:
    """Components under `root` of `path`, absolute or relative to `cwd` (default root),
    worked out from the text alone (`..` folds lexically; nothing on disk is asked, so a link
    cannot steer it). WorkspacePathError when it lands outside root."""
    if "\0" in path:
        raise WorkspacePathError("path contains a NUL byte")
    joined = os.path.normpath(os.path.join(str(cwd or root), path))
    rel = os.path.relpath(joined, str(root))
    if rel == ".":
        return []
    if rel == ".." or rel.startswith("../") or os.path.isabs(rel):
        raise WorkspacePathError(f"path {path!r} is outside the workspace ({root})")
    return rel.split("/")


def open_root(root: Path) -> int:
    """A descriptor of the workspace root itself (never through a link)."""
    return os.open(root, DIR_FLAGS)


def open_dir_at(dir_fd: int, parts: list[str], *, create: bool = False, shown: str = "") -> int:
    """A new descriptor of the folder `parts` under `dir_fd`, walked without following links;
    `create` makes missing folders on the way (as the agent's would be made, mode 0777 less
    the umask). The caller closes it."""
    return _walk(dir_fd, parts, create=create, owner=None, shown=shown)


def _walk(dir_fd: int, parts: list[str], *, create: bool, owner: Owner | None, shown: str) -> int:
    """`open_dir_at`; with `owner`, each folder this call makes is given to it (by handle)."""
    fd = os.dup(dir_fd)
    try:
        for i, part in enumerate(parts):
            made = False
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
                    made = True
            try:
                child = os.open(part, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise refusal(exc, fd, part, shown or "/".join(parts[: i + 1])) from None
            os.close(fd)
            fd = child
            if made and owner is not None:
                os.fchown(fd, *owner)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def open_dir(root: Path, parts: list[str], *, create: bool = False) -> Iterator[int]:
    """A descriptor of the folder root/parts, never through a symbolic link."""
    base = open_root(root)
    try:
        fd = open_dir_at(base, parts, create=create)
    finally:
        os.close(base)
    try:
        yield fd
    finally:
        os.close(fd)


def refusal(exc: OSError, parent: int, name: str, shown: str) -> OSError:
    """The error to raise for a failed open of `name` in `parent`: a link is named as one."""
    link = WorkspacePathError(f"{shown!r} is a symbolic link; links are not followed")
    if exc.errno == errno.ELOOP:
        return link
    if exc.errno in (errno.ENOTDIR, errno.EEXIST):
        try:
            mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
        except OSError:
            mode = 0
        # A folder now that was not one when opened: it was swapped for a link meanwhile.
        if stat.S_ISLNK(mode) or (exc.errno == errno.ENOTDIR and stat.S_ISDIR(mode)):
            return link
        if exc.errno == errno.ENOTDIR:
            return NotADirectoryError(errno.ENOTDIR, "not a directory", shown)
        return FileExistsError(errno.EEXIST, "already exists", shown)
    if exc.errno == errno.ENOENT:
        return FileNotFoundError(errno.ENOENT, "no such file or directory", shown)
    if exc.errno == errno.EISDIR:
        return IsADirectoryError(errno.EISDIR, "is a directory", shown)
    return exc


def lstat(root: Path, parts: list[str]) -> os.stat_result | None:
    """What the last component is, without following it; None when it does not exist.
    Links on the way to it are refused like anywhere else."""
    if not parts:
        return os.stat(root, follow_symlinks=False)
    try:
        with open_dir(root, parts[:-1]) as parent:
            return os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return None


def is_dir(root: Path, parts: list[str]) -> bool:
    """Whether root/parts is a folder reached without passing a link (False when it is gone,
    a file, a link, or has a link on the way). Only an answer for now: open it by handle to
    use it."""
    try:
        with open_dir(root, parts):
            return True
    except (OSError, WorkspacePathError):
        return False


def open_file_at(parent: int, name: str, shown: str) -> int:
    """A read descriptor of the regular file `name` in the open folder `parent`."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise refusal(exc, parent, name, shown) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", shown)
        raise WorkspacePathError(f"{shown!r} is not a regular file")
    return fd


def read_bytes(root: Path, parts: list[str], *, limit: int) -> bytes:
    """The whole regular file root/parts; FileTooLarge past `limit` bytes."""
    shown = "/".join(parts)
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "is a directory", shown)
    with open_dir(root, parts[:-1]) as parent:
        fd = open_file_at(parent, parts[-1], shown)
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise FileTooLarge(shown, size, limit)
        data = f.read(limit + 1)
    if len(data) > limit:  # it grew while being read
        raise FileTooLarge(shown, len(data), limit)
    return data


def write_bytes(
    root: Path, parts: list[str], data: bytes, *, exclusive: bool = False,
    make_parents: bool = False,
) -> None:  # fmt: skip
    """Write root/parts whole. `exclusive`: FileExistsError when anything has that name
    (a link included). An existing link in its place is refused, an existing file's mode kept."""
    write_owned(root, parts, data, owner=None, exclusive=exclusive, make_parents=make_parents)


def write_owned(
    root: Path, parts: list[str], data: bytes, *, owner: Owner | None,
    exclusive: bool = False, make_parents: bool = False,
) -> None:  # fmt: skip
    """`write_bytes`, giving what this call creates (the folders `make_parents` makes, a new
    file) to `owner` by descriptor, so an agent running as another user (a container's) can
    change it later. None leaves ownership as this process makes it."""
    shown = "/".join(parts)
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "is a directory", shown)
    parent = open_root(root)
    try:
        folder = _walk(parent, parts[:-1], create=make_parents, owner=owner, shown="")
    finally:
        os.close(parent)
    try:
        _write_at(folder, parts[-1], data, exclusive=exclusive, shown=shown, owner=owner)
    finally:
        os.close(folder)


def write_bytes_at(
    parent: int, name: str, data: bytes, *, exclusive: bool = False, shown: str = ""
) -> None:
    """`write_bytes` into the open folder `parent`."""
    _write_at(parent, name, data, exclusive=exclusive, shown=shown or name, owner=None)


def create_file_at(parent: int, name: str, shown: str, *, mode: int = 0o666) -> int:
    """A write descriptor of a new file `name` in the open folder `parent` (`mode` less the
    umask). FileExistsError when anything has that name; a link there is refused as a link."""
    try:
        return os.open(name, _NEW_FILE_FLAGS, mode, dir_fd=parent)
    except OSError as exc:
        raise refusal(exc, parent, name, shown) from None


def _write_at(
    parent: int, name: str, data: bytes, *, exclusive: bool, shown: str, owner: Owner | None
) -> None:
    """Write `name` in `parent` whole (see `write_bytes`). An existing file keeps its mode, and
    its owner where this process may set it (a root worker); a new one goes to `owner`."""
    if exclusive:
        _write_all(create_file_at(parent, name, shown), data, owner=owner)
        return
    mode, keep = 0o666 & ~_umask(), owner
    with contextlib.suppress(FileNotFoundError):
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            raise WorkspacePathError(f"{shown!r} is a symbolic link; links are not followed")
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", shown)
        if not stat.S_ISREG(info.st_mode):
            raise WorkspacePathError(f"{shown!r} is not a regular file")
        mode = stat.S_IMODE(info.st_mode)
        keep = (info.st_uid, info.st_gid) if (info.st_uid, info.st_gid) != _me() else None
    temp = f".{name[:64]}.{uuid.uuid4().hex}.partial"
    fd = os.open(temp, _NEW_FILE_FLAGS, 0o600, dir_fd=parent)
    try:
        os.fchmod(fd, mode)
        _write_all(fd, data, owner=keep)
        os.replace(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=parent)
        raise


def unlink(root: Path, parts: list[str]) -> None:
    """Remove the file (or link: never what it points to) root/parts."""
    shown = "/".join(parts)
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "is a directory", shown)
    with open_dir(root, parts[:-1]) as parent:
        try:
            os.unlink(parts[-1], dir_fd=parent)
        except OSError as exc:
            raise refusal(exc, parent, parts[-1], shown) from None


def _write_all(fd: int, data: bytes, *, owner: Owner | None = None) -> None:
    """Write `data` to `fd` and close it; with `owner`, give the file to it first (a process
    that may not, being no root, leaves it its own)."""
    with os.fdopen(fd, "wb") as f:
        if owner is not None and owner != _me():
            with contextlib.suppress(PermissionError):
                os.fchown(f.fileno(), *owner)
        f.write(data)


def _me() -> Owner:
    return os.geteuid(), os.getegid()


@functools.cache
def _umask() -> int:
    """The process's umask, read without setting it (os.umask would change it for a moment
    under every other thread)."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022
