"""Whole folders under a workspace, by handle: walking, sizing and copying a tree.

Built on workspaces.fs, so the rule is the same: nothing is opened by a name resolved twice.
Each folder is entered by `O_NOFOLLOW` relative to its parent's descriptor and listed from its
own descriptor; a regular file is read from a descriptor opened `O_NOFOLLOW | O_NONBLOCK` and
checked regular by `fstat`; a symbolic link is read as its text (`readlink` by descriptor),
never followed. An agent's command may change the tree while it is walked (swap a folder for a
link with RENAME_EXCHANGE, remove a file): an entry that is no longer what it was listed as is
left out, as if it had been changed a moment earlier, so a race ends in a smaller tree and
never in a file from outside it. Sockets, pipes and devices are left out too.

A tree deeper than MAX_DEPTH folders is refused (TreeTooDeep): one descriptor stays open per
level, and no reader should walk what an agent nested on purpose.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from workspaces.base import WorkspacePathError
from workspaces.fs import Owner, open_dir_at, open_file_at, open_root

MAX_DEPTH = 256
_CHUNK = 1 << 30
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_RACES = (WorkspacePathError, FileNotFoundError, NotADirectoryError, IsADirectoryError)
"""What opening an entry ends in when it changed since it was listed: it is left out."""

Kind = Literal["dir", "file", "link"]


class TreeTooDeep(WorkspacePathError):
    """The tree nests folders deeper than MAX_DEPTH."""


class TreeTooLarge(ValueError):
    """The regular files of a tree hold more than `limit` bytes."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the folder holds more than {limit} bytes")
        self.limit = limit


@dataclass(slots=True)
class Entry:
    """One entry met by `walk`: `parent` (the open folder holding it) is valid until the walk
    goes on. Clear `descend` on a folder's entry to not walk into it."""

    parent: int
    name: str
    parts: tuple[str, ...]
    kind: Kind
    descend: bool = True

    @property
    def path(self) -> str:
        return "/".join(self.parts)


@dataclass(frozen=True, slots=True)
class Left:
    """`walk` is done with the folder `parts` (its entries all came before). `opened` is False
    when it could not be entered (it changed since it was listed, or `descend` was cleared)."""

    parts: tuple[str, ...]
    opened: bool


def walk(root_fd: int, *, max_depth: int = MAX_DEPTH) -> Iterator[Entry | Left]:
    """Every folder, regular file and link under `root_fd`, depth first, each folder's entry
    before its contents and a Left after them. Listings are taken whole, then each entry is
    met as it is by then. TreeTooDeep past `max_depth`."""
    stack = [(os.dup(root_fd), (), _listed(root_fd))]
    try:
        while stack:
            fd, parts, pending = stack[-1]
            if not pending:
                os.close(fd)
                stack.pop()
                if parts:
                    yield Left(parts, True)
                continue
            name, kind = pending.pop()
            entry = Entry(fd, name, (*parts, name), kind)
            yield entry
            if kind != "dir":
                continue
            if not entry.descend:
                yield Left(entry.parts, False)
                continue
            if len(stack) > max_depth:
                raise TreeTooDeep(f"{entry.path!r} is nested more than {max_depth} folders deep")
            try:
                child = open_dir_at(fd, [name], shown=entry.path)
            except (*_RACES, PermissionError):
                yield Left(entry.parts, False)
                continue
            try:
                listed = _listed(child)
            except BaseException:
                os.close(child)
                raise
            stack.append((child, entry.parts, listed))
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def _listed(fd: int) -> list[tuple[str, Kind]]:
    """The folder's folders, files and links (not what else it holds), last name first."""
    found: list[tuple[str, Kind]] = []
    with os.scandir(fd) as it:
        for entry in it:
            try:
                if entry.is_dir(follow_symlinks=False):
                    found.append((entry.name, "dir"))
                elif entry.is_symlink():
                    found.append((entry.name, "link"))
                elif entry.is_file(follow_symlinks=False):
                    found.append((entry.name, "file"))
            except OSError:
                continue  # gone already
    found.sort(reverse=True)
    return found


def open_regular(entry: Entry) -> int | None:
    """A read descriptor of the regular file `entry`; None when it is no longer one."""
    try:
        return open_file_at(entry.parent, entry.name, entry.path)
    except (*_RACES, PermissionError):
        return None


def read_link(entry: Entry) -> str | None:
    """The text of the link `entry` (never followed); None when it is no longer a link."""
    try:
        return os.readlink(entry.name, dir_fd=entry.parent)
    except OSError:
        return None


def tree_size(root: Path, limit: int) -> int:
    """The bytes in the regular files under `root` as listed (links and folders count nothing),
    counted up to the first total above `limit`."""
    total = 0
    base = open_root(root)
    try:
        for entry in walk(base):
            if isinstance(entry, Entry) and entry.kind == "file":
                with contextlib.suppress(OSError):
                    total += os.stat(entry.name, dir_fd=entry.parent, follow_symlinks=False).st_size
                if total > limit:
                    break
    finally:
        os.close(base)
    return total


@dataclass(frozen=True, slots=True)
class Copied:
    files: int
    links: int
    folders: int
    bytes: int


def copy_tree(
    src_root: Path, dst_root: Path, *, limit_bytes: int,
    skip: Callable[[Entry], bool] = lambda entry: False,
) -> Copied:  # fmt: skip
    """Copy the tree under `src_root` into the existing, empty folder `dst_root`: folders,
    regular files (contents, mode and times) and links as links; what changes mid-walk is left
    out (see the module docstring), as is any entry `skip` names. TreeTooLarge as soon as the
    files copied pass `limit_bytes` (a file growing while it is copied included); the caller
    removes the partial copy."""
    src = open_root(src_root)
    try:
        dst = open_root(dst_root)
    except BaseException:
        os.close(src)
        raise
    targets: list[tuple[tuple[str, ...], int, int]] = [((), dst, 0)]
    """(folder, its copy's descriptor, the source's mode) of each level the walk is in."""
    counts = {"file": 0, "link": 0, "dir": 0}
    total = 0
    try:
        for entry in walk(src):
            if isinstance(entry, Left):
                if targets[-1][0] == entry.parts:
                    _, folder, mode = targets.pop()
                    _finish_folder(folder, mode, into=targets[-1][1], entry=entry)
                continue
            if skip(entry):
                entry.descend = False
                continue
            into = targets[-1][1]
            if entry.kind == "dir":
                mode = _mode(entry)
                if mode is None:
                    entry.descend = False
                    continue
                os.mkdir(entry.name, 0o700, dir_fd=into)  # ours to fill; its mode comes last
                targets.append((entry.parts, open_dir_at(into, [entry.name]), mode))
            elif entry.kind == "link":
                target = read_link(entry)
                if target is None:
                    continue
                os.symlink(target, entry.name, dir_fd=into)
            else:
                copied = _copy_file(entry, into, limit_bytes - total)
                if copied is None:
                    continue
                total += copied
            counts[entry.kind] += 1
    except _OverBudget:
        raise TreeTooLarge(limit_bytes) from None
    finally:
        for _, fd, _ in targets:
            os.close(fd)
        os.close(src)
    return Copied(counts["file"], counts["link"], counts["dir"], total)


class _OverBudget(Exception):
    pass


def _mode(entry: Entry) -> int | None:
    """The permission bits of the folder `entry`; None when it is no longer a folder."""
    try:
        info = os.stat(entry.name, dir_fd=entry.parent, follow_symlinks=False)
    except OSError:
        return None
    return stat.S_IMODE(info.st_mode) if stat.S_ISDIR(info.st_mode) else None


def _finish_folder(folder: int, mode: int, *, into: int, entry: Left) -> None:
    """Give a copied folder its source's mode, or remove it when the source could not be
    entered (it changed since it was listed: left out like any other entry that did)."""
    try:
        if entry.opened:
            os.fchmod(folder, mode)
    finally:
        os.close(folder)
    if not entry.opened:
        os.rmdir(entry.parts[-1], dir_fd=into)


def _copy_file(entry: Entry, into: int, budget: int) -> int | None:
    """Copy the regular file `entry` into the open folder `into`; the bytes copied, None when
    it is no longer a regular file. TreeTooLarge past `budget` bytes."""
    src = open_regular(entry)
    if src is None:
        return None
    try:
        info = os.fstat(src)
        if info.st_size > budget:
            raise _OverBudget
        dst = os.open(entry.name, _NEW_FILE_FLAGS, 0o600, dir_fd=into)
        try:
            copied = _copy_bytes(src, dst, budget)
            os.fchmod(dst, stat.S_IMODE(info.st_mode))
            os.utime(dst, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            os.close(dst)
    finally:
        os.close(src)
    return copied


def _copy_bytes(src: int, dst: int, budget: int) -> int:
    """Copy from `src` (at its start) until its end; TreeTooLarge once past `budget`."""
    copied = 0
    while True:
        want = min(_CHUNK, budget - copied + 1)
        try:
            n = os.copy_file_range(src, dst, want)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
            n = os.sendfile(dst, src, None, want)
        if n == 0:
            return copied
        copied += n
        if copied > budget:
            raise _OverBudget


def chown_tree(root_fd: int, owner: Owner, *, max_depth: int = MAX_DEPTH) -> int:
    """Give the folder `root_fd` and every folder and regular file under it to `owner` (uid,
    gid); how many were given. Each is changed through a descriptor of its own, opened
    `O_NOFOLLOW` relative to its parent's, after `fstat` says what it is: never by a name
    that could have been swapped for a link meanwhile, so nothing outside the tree changes
    owner. Left as they are: links (a link's owner grants nothing; whoever owns its folder
    may replace it), whatever changed since it was listed (see the module docstring), and a
    regular file with other hard links (`st_nlink` > 1), whose other names may lie outside
    (a `git clone --local` links the source's objects), and what lies more than `max_depth`
    folders down (an agent's nesting must not stop the rest being given)."""
    os.fchown(root_fd, *owner)
    given = 1
    for entry in walk(root_fd, max_depth=max_depth):
        if isinstance(entry, Entry) and entry.kind != "link":
            given += _give(entry, owner)
            entry.descend = len(entry.parts) < max_depth
    return given


def _give(entry: Entry, owner: Owner) -> int:
    """chown_tree's step for one folder or regular file: 1 when it was given, else 0."""
    if entry.kind == "dir":
        try:
            fd = open_dir_at(entry.parent, [entry.name], shown=entry.path)
        except (*_RACES, PermissionError):
            return 0
    else:
        fd = open_regular(entry)
        if fd is None:
            return 0
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            return 0
        os.fchown(fd, *owner)
    finally:
        os.close(fd)
    return 1
