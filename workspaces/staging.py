"""The workspace's files as a git index, read by handle: what workspaces.baseline compares.

`git add` reads the work tree by name: it lists a folder, then opens `folder/file` by its path,
so an agent that swaps `folder` for a link to another team's folder between the two gets that
team's file staged, shown in a diff and packed into an archive (seen in 159 of 300 readings
under a RENAME_EXCHANGE swapper). So git never reads the workspace here: the tree is walked by
workspaces.fs_tree (folders entered by descriptor with O_NOFOLLOW, files read from descriptors
checked regular, links recorded as their text), the changed files' contents are handed to
`git fast-import` as blobs, and the index is written with `git update-index --index-info`.

What is staged is what `git add --all --force` staged before, with two differences that follow
from reading by handle: an entry changed mid-walk is left out (as if changed a moment earlier),
and a folder holding its own repository shows its files (every `.git` is left out, as git
leaves it out) rather than one gitlink entry.

A stat cache (`last-stat`, next to the index it describes) spares re-reading unchanged files:
an entry whose inode, size, mode, mtime and ctime match is taken at its recorded blob. An entry
changed in the two seconds before the reading started is never cached (a same-size write in
the same clock tick would otherwise go unseen).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from workspaces.fs import open_root
from workspaces.fs_tree import MAX_DEPTH, Entry, open_regular, read_link, walk

STAT_CACHE = "last-stat"
_RACY_NS = 2_000_000_000
_SPOOL_ABOVE = 16 * 1024 * 1024
"""Files larger than this go through a temporary file rather than memory."""
_CHUNK = 1024 * 1024

Run = Callable[..., str]
"""_Git.run: run a git command with the repository's environment."""
Popen = Callable[..., subprocess.Popen[bytes]]

Cached = dict[str, list]
"""path -> [ino, size, mode, mtime_ns, ctime_ns, blob id]"""


def stage(root: Path, *, cache_file: Path, start: Popen, run: Run, leave_out: str) -> Cached:
    """Write the index (the caller's GIT_INDEX_FILE, which must not exist yet) for the tree
    under `root` as it is now, `leave_out` (a top-level name) and every `.git` left out. The
    new stat cache is returned for the caller to keep beside the index it kept."""
    old = _load(cache_file)
    started = time.time_ns()
    new: Cached = {}
    records: list[bytes] = []
    base = open_root(root)
    importer = start("fast-import", "--quiet")
    try:
        assert importer.stdin is not None
        for entry in walk(base):
            if not isinstance(entry, Entry):
                continue
            if entry.name == ".git" or entry.parts == (leave_out,):
                entry.descend = False
                continue
            if entry.kind == "dir":
                entry.descend = len(entry.parts) < MAX_DEPTH
                continue
            found = _blob(entry, old.get(entry.path), importer.stdin)
            if found is None:
                continue
            mode, sha, info = found
            records.append(b"%s %s\t%s\0" % (mode, sha.encode(), os.fsencode(entry.path)))
            if info is not None and max(info.st_mtime_ns, info.st_ctime_ns) < started - _RACY_NS:
                new[entry.path] = [*_key(info), sha]
        importer.stdin.close()
        if importer.wait() != 0:
            raise OSError(f"git fast-import failed ({importer.returncode})")
    finally:
        os.close(base)
        if importer.poll() is None:
            importer.kill()
            importer.wait()
    if records:
        run("update-index", "-z", "--index-info", stdin=b"".join(records))
    else:  # nothing to stage: still an index, an empty one
        run("read-tree", "--empty")
    return new


def keep(cache: Cached, cache_file: Path) -> None:
    temp = cache_file.with_name(f".{cache_file.name}.{uuid.uuid4().hex}")
    temp.write_text(json.dumps(cache, separators=(",", ":")), "utf-8", errors="surrogateescape")
    os.replace(temp, cache_file)


def _load(cache_file: Path) -> Cached:
    try:
        return json.loads(cache_file.read_text("utf-8", errors="surrogateescape"))
    except (OSError, ValueError):
        return {}


def _key(info: os.stat_result) -> list[int]:
    return [info.st_ino, info.st_size, info.st_mode, info.st_mtime_ns, info.st_ctime_ns]


def _blob(
    entry: Entry, cached: list | None, out
) -> tuple[bytes, str, os.stat_result | None] | None:
    """(git mode, blob id, the stat it was read at, None for a link) of the file or link
    `entry`, its contents written to fast-import unless the cache knows them; None when it
    is no longer what it was listed as (or cannot be read)."""
    if entry.kind == "link":
        text = read_link(entry)
        if text is None:
            return None
        return b"120000", _write_blob(out, os.fsencode(text)), None
    try:
        info = os.stat(entry.name, dir_fd=entry.parent, follow_symlinks=False)
    except OSError:
        return None
    mode = b"100755" if info.st_mode & stat.S_IXUSR else b"100644"
    if cached is not None and cached[:5] == _key(info) and stat.S_ISREG(info.st_mode):
        return mode, cached[5], info
    fd = open_regular(entry)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if info.st_size <= _SPOOL_ABOVE:
            data = f.read()
            return mode, _write_blob(out, data), info
        with tempfile.TemporaryFile() as spool:
            while chunk := f.read(_CHUNK):
                spool.write(chunk)
            return mode, _write_spooled(out, spool), info


def _write_blob(out, data: bytes) -> str:
    out.write(b"blob\ndata %d\n" % len(data))
    out.write(data)
    out.write(b"\n")
    digest = hashlib.sha1(b"blob %d\0" % len(data), usedforsecurity=False)
    digest.update(data)
    return digest.hexdigest()


def _write_spooled(out, spool) -> str:
    size = spool.tell()
    spool.seek(0)
    digest = hashlib.sha1(b"blob %d\0" % size, usedforsecurity=False)
    out.write(b"blob\ndata %d\n" % size)
    while chunk := spool.read(_CHUNK):
        digest.update(chunk)
        out.write(chunk)
    out.write(b"\n")
    return digest.hexdigest()
