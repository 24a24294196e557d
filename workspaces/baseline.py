"""What changed in a workspace since its starting point: a git baseline kept out of its reach.

`take()` snapshots every file of the workspace (untracked and ignored ones included: the
workspace's own `.gitignore` hides nothing) into a git repository in the conversation's state
directory, `baseline.git`, with the workspace as its work tree (GIT_DIR / GIT_WORK_TREE). The
repository lives there, not in the workspace, because the agent may write anything in its
workspace: a `.git` in it could be rewritten to hide a change, carry hooks or a config that runs
programs, and it would clash with the agent's own use of git. The sandbox never mounts the state
directory, so the agent can neither see nor alter the baseline.

Reading the changes runs git over the agent's files, in the web process, but git never reads the
workspace itself: workspaces.staging walks it by handle (an agent swapping a folder for a link
mid-reading gets the entry left out, never another team's file staged) and hands git the
contents; git's work tree is an empty folder of ours. Nothing the agent wrote may steer it: no system, global or workspace config (the repository is ours, HOME is an empty
directory, GIT_CONFIG_NOSYSTEM), no hooks, no external diff or textconv, no pathspec magic, and
`info/attributes` (which outranks every `.gitattributes`) unsets the attributes that change
what is read or shown (`-diff`, `text`/`eol`, `filter`, `export-ignore`, ...). Symbolic links
are recorded as links, never followed. A folder holding its own repository (a clone made by the
agent) shows its files; every `.git` is left out.

Each reading stages the work tree into a private index (a stat cache kept beside the last one
spares reading unchanged files again) and compares it with the baseline commit. Staging writes
the changed files' contents as objects nothing keeps (one pack per reading that found a
change), so after a reading `git gc --auto` with low thresholds drops them once they pile up: the
repository holds the baseline, the kept index's files and a bounded amount of garbage. It runs
only while no reading is under way (a lock), so it never drops an object one is using.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from workspaces import staging
from workspaces.base import ChangeStatus, FileChange, FileDiff, WorkspacePathError
from workspaces.fs import parts_of
from workspaces.outputs import OUTPUTS_DIR

BASELINE_DIR = "baseline.git"
MAX_DIFF_BYTES = 256 * 1024
"""Files above this size on either side are summarised, not diffed."""

_REF = "refs/heads/baseline"
_LAST_INDEX = "last-index"
_READINGS_LOCK = "readings.lock"
_LAST_LOCK = "last.lock"
READING_FILES = ("index", "index.*", _LAST_INDEX, staging.STAT_CACHE, "*.lock")
"""What readings keep beside the baseline (indexes, stat caches, locks): they describe one
work tree, so a copy of the baseline for another (a fork's) leaves them out."""
_GIT_TIMEOUT = 300.0
_CHUNK = 256 * 1024
_NO_SHA = "0" * 40
_PATH = "/usr/local/bin:/usr/bin:/bin"
_ATTRIBUTES = (
    "* !diff !merge !text !eol !crlf !ident !filter !working-tree-encoding "
    "!export-ignore !export-subst\n"
)
_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.symlinks=true",
    "core.quotePath=false",
    f"core.bigFileThreshold={MAX_DIFF_BYTES}",
    "gc.auto=0",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "submodule.recurse=false",
    "fastimport.unpackLimit=0",  # a reading's blobs land in one pack, never as loose files
)
TIDY_PACK_LIMIT = 16
"""Packs (each reading that found a changed file writes one) that make a reading tidy."""
_TIDY_CONFIG = (
    "gc.auto=1024",  # loose objects (git estimates them from one of its 256 folders)
    f"gc.autoPackLimit={TIDY_PACK_LIMIT}",
    "gc.autoDetach=false",  # done when the call returns, not by a stray background process
    "gc.pruneExpire=now",  # no reading is under way: nothing unreferenced is in use
    "gc.cruftPacks=false",  # dropped, not kept in a cruft pack (the default from git 2.41)
    "gc.packRefs=false",  # `exists` looks for the ref's own file
    "gc.writeCommitGraph=false",
    "pack.threads=1",  # housekeeping in the web process: leave the other cores alone
)
"""Overrides `gc.auto=0` for the one call that tidies (Baseline._tidy)."""
_STATUSES: dict[str, ChangeStatus] = {"A": "added", "D": "deleted"}

logger = logging.getLogger(__name__)


class BaselineError(RuntimeError):
    """git failed on the workspace (the message is git's own, for the log)."""


class Baseline:
    """The baseline of the workspace `root`, kept in `state_dir`."""

    def __init__(self, root: Path, state_dir: Path) -> None:
        self.root = Path(root)
        self.state_dir = Path(state_dir)
        self.git_dir = self.state_dir / BASELINE_DIR

    @property
    def exists(self) -> bool:
        return (self.git_dir / _REF).is_file()

    def take(self) -> bool:
        """Snapshot the workspace unless a baseline exists; True when this call took it.

        Built in a scratch directory and renamed into place, so a crash or a racing runner
        leaves either no baseline or a whole one."""
        if self.exists:
            return False
        with self._scratch(BASELINE_DIR) as (git, tree):
            commit = git.run("commit-tree", tree, "-m", "baseline").strip()
            git.run("update-ref", _REF, commit)
            try:
                os.rename(git.git_dir, self.git_dir)
            except OSError:
                if self.exists:  # another runner took it first
                    return False
                raise
            return True

    def changes(self) -> list[FileChange]:
        """Every path added, modified or deleted since the baseline, sorted by path; empty
        when no baseline was taken."""
        if not self.exists:
            return []
        with self._staged() as git:
            return _changes(git)

    def diff(self, path: str) -> FileDiff:
        """The unified diff of one changed path. KeyError when `path` did not change,
        WorkspacePathError when it is no path in the workspace (`..`, absolute, empty)."""
        parts = parts_of(path)
        if not parts:
            raise WorkspacePathError("which file's diff? Give its path in the workspace")
        path = "/".join(parts)
        if not self.exists:
            raise KeyError(path)
        with self._staged() as git:
            raw = _raw(git, path)
            if path not in raw:
                raise KeyError(path)
            status, old_sha, new_sha = raw[path]
            sizes = _sizes(git, [old_sha, new_sha])
            old_size, new_size = sizes.get(old_sha), sizes.get(new_sha)
            if max(old_size or 0, new_size or 0) > MAX_DIFF_BYTES:
                return FileDiff(path, status, "", _summary("large file", old_size, new_size))
            text = git.run(
                "diff-index", "--cached", "--patch", "--no-renames", "--no-ext-diff",
                "--no-textconv", "--no-color", "--ignore-submodules=none", _REF, "--", path,
            )  # fmt: skip
            if not any(line.startswith("@@") for line in text.splitlines()):
                return FileDiff(path, status, "", _summary("binary file", old_size, new_size))
            return FileDiff(path, status, text, None)

    def archive(self, out: BinaryIO, *, prefix: str) -> None:
        """Write the workspace as it is now, as a tar.gz, to `out` (files under `prefix/`).

        Without a baseline a throwaway repository stages the files."""
        if self.exists:
            with self._staged() as git:
                tree = git.run("write-tree").strip()
                git.copy_out(out, "archive", "--format=tgz", f"--prefix={prefix}/", tree)
            return
        with self._scratch("archive") as (git, tree):
            git.copy_out(out, "archive", "--format=tgz", f"--prefix={prefix}/", tree)

    @contextlib.contextmanager
    def _scratch(self, name: str) -> Iterator[tuple[_Git, str]]:
        """A new repository in a scratch directory holding the work tree as it is now, and
        its tree id; removed afterwards unless it was moved away."""
        scratch = self.state_dir / f".{name}.{uuid.uuid4().hex}"
        try:
            git = _Git(self.root, scratch, scratch / "index")
            git.init()
            staging.keep(git.add_all(scratch / staging.STAT_CACHE), scratch / staging.STAT_CACHE)
            yield git, git.run("write-tree").strip()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    @contextlib.contextmanager
    def _staged(self) -> Iterator[_Git]:
        """git over a private index holding the work tree as it is now. It is kept, with its
        stat cache, as the last reading (gc keeps its objects, and the next reading reuses the
        cache's blob ids); the pair is read and replaced under a lock of its own, so a cache
        never names blobs its index does not keep. Readings share a lock that tidying takes
        alone; each tidies after itself."""
        last = self.git_dir / _LAST_INDEX
        cache = self.git_dir / staging.STAT_CACHE
        index = self.git_dir / f"index.{uuid.uuid4().hex}"
        with open(self.git_dir / _READINGS_LOCK, "ab") as lock:
            fcntl.flock(lock, fcntl.LOCK_SH)  # released when the file closes
            try:
                git = _Git(self.root, self.git_dir, index)
                with self._last(fcntl.LOCK_SH):
                    staged = git.add_all(cache)
                yield git
                with self._last(fcntl.LOCK_EX):
                    os.replace(index, last)
                    staging.keep(staged, cache)
            finally:
                index.unlink(missing_ok=True)
        self._tidy()

    @contextlib.contextmanager
    def _last(self, how: int) -> Iterator[None]:
        with open(self.git_dir / _LAST_LOCK, "ab") as lock:
            fcntl.flock(lock, how)
            yield

    def _tidy(self) -> None:
        """Drop the objects no reading refers to once enough have piled up (`git gc --auto`,
        _TIDY_CONFIG); the kept index, given as GIT_INDEX_FILE, keeps the ones it names. Only
        while no other reading holds the lock, else skipped: the next reading tries again. A
        failure is logged, not raised: the reading itself succeeded."""
        with open(self.git_dir / _READINGS_LOCK, "ab") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return
            last = self.git_dir / _LAST_INDEX
            git = _Git(self.root, self.git_dir, last if last.exists() else self.git_dir / "index")
            try:
                git.run("gc", "--auto", "--quiet", config=_TIDY_CONFIG)
            except (BaselineError, subprocess.TimeoutExpired) as exc:
                logger.warning("baseline gc failed in %s: %s", self.git_dir, exc)


def _changes(git: _Git) -> list[FileChange]:
    counts: dict[str, tuple[int | None, int | None]] = {}
    out = git.run("diff-index", "--cached", "--numstat", "-z", "--no-renames", _REF)
    for record in out.split("\0"):
        if record:
            added, removed, path = record.split("\t", 2)
            counts[path] = (_count(added), _count(removed))
    return [
        FileChange(path, status, *counts.get(path, (None, None)))
        for path, (status, _, _) in sorted(_raw(git).items())
    ]


def _raw(git: _Git, path: str | None = None) -> dict[str, tuple[ChangeStatus, str, str]]:
    """path -> (status, old blob, new blob) for every change (or only `path`)."""
    args = ["diff-index", "--cached", "--raw", "-z", "--no-renames", "--abbrev=40", _REF]
    if path is not None:
        args += ["--", path]
    fields = git.run(*args).split("\0")
    found = {}
    for meta, name in zip(fields[0::2], fields[1::2], strict=False):
        if not meta.startswith(":"):
            continue
        _, _, old_sha, new_sha, letter = meta[1:].split(" ")
        found[name] = (_STATUSES.get(letter[:1], "modified"), old_sha, new_sha)
    return found


def _sizes(git: _Git, shas: list[str]) -> dict[str, int]:
    wanted = [sha for sha in shas if sha != _NO_SHA]
    if not wanted:
        return {}
    out = git.run("cat-file", "--batch-check=%(objectname) %(objectsize)", stdin="\n".join(wanted))
    sizes = {}
    for line in out.splitlines():
        sha, _, size = line.partition(" ")
        if size.isdigit():
            sizes[sha] = int(size)
    return sizes


def _count(text: str) -> int | None:
    return int(text) if text.isdigit() else None  # "-" for binary (and large) files


def _summary(kind: str, old: int | None, new: int | None) -> str:
    if old is None:
        return f"{kind}, {new} bytes (added)"
    if new is None:
        return f"{kind}, {old} bytes (deleted)"
    return f"{kind}, {old} → {new} bytes"


class _Git:
    """git on `root` with the repository `git_dir` and the index `index`, and nothing else
    from the environment (see the module docstring)."""

    def __init__(self, root: Path, git_dir: Path, index: Path) -> None:
        self.root = root
        self.git_dir = git_dir
        home = git_dir.parent / "baseline.home"  # empty: no ~/.gitconfig, no ~/.config/git
        home.mkdir(exist_ok=True)
        # git never reads the workspace (workspaces.staging does, by handle): its work tree
        # is this empty folder of ours.
        self.work_tree = home
        self.env = {
            "PATH": _PATH,
            "HOME": str(home),
            "LANG": "C",
            "LC_ALL": "C",
            "GIT_DIR": str(git_dir),
            "GIT_WORK_TREE": str(home),
            "GIT_INDEX_FILE": str(index),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_LITERAL_PATHSPECS": "1",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_AUTHOR_NAME": "canvas",
            "GIT_AUTHOR_EMAIL": "canvas@localhost",
            "GIT_COMMITTER_NAME": "canvas",
            "GIT_COMMITTER_EMAIL": "canvas@localhost",
        }

    def init(self) -> None:
        self.run("init", "--quiet", "--template=")
        (self.git_dir / "info").mkdir(exist_ok=True)
        (self.git_dir / "info" / "attributes").write_text(_ATTRIBUTES)

    def add_all(self, cache: Path) -> staging.Cached:
        """Stage every file, ignored ones too, but our output area (workspaces.outputs: cut
        command outputs are not the agent's work), read by handle (workspaces.staging) with
        the stat cache `cache`; the new cache is returned. A file it cannot read is left out
        rather than failing the whole reading."""
        return staging.stage(
            self.root, cache_file=cache, start=self.popen, run=self.run, leave_out=OUTPUTS_DIR
        )

    def popen(self, *args: str) -> subprocess.Popen[bytes]:
        """git taking input on a pipe (fast-import), its output discarded."""
        return subprocess.Popen(
            self.argv(*args), cwd=self.work_tree, env=self.env, stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def argv(self, *args: str, config: tuple[str, ...] = ()) -> list[str]:
        """git with _CONFIG, then `config` (a later setting wins), then `args`."""
        argv = ["git"]
        for setting in (*_CONFIG, *config):
            argv += ["-c", setting]
        return [*argv, *args]

    def run(
        self,
        *args: str,
        stdin: str | bytes | None = None,
        ok: tuple[int, ...] = (0,),
        config: tuple[str, ...] = (),
    ) -> str:
        proc = subprocess.run(
            self.argv(*args, config=config),
            cwd=self.work_tree,
            env=self.env,
            input=stdin.encode() if isinstance(stdin, str) else stdin,
            stdin=subprocess.DEVNULL if stdin is None else None,
            capture_output=True,
            timeout=_GIT_TIMEOUT,
            check=False,
        )
        _check(args[0], proc.returncode, proc.stderr, ok)
        return proc.stdout.decode("utf-8", "surrogateescape")

    def copy_out(self, out: BinaryIO, *args: str) -> None:
        """Run git and copy its output into `out` as it comes (any writable file object)."""
        with tempfile.TemporaryFile() as errors:
            proc = subprocess.Popen(
                self.argv(*args), cwd=self.work_tree, env=self.env, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=errors,
            )  # fmt: skip
            try:
                assert proc.stdout is not None
                shutil.copyfileobj(proc.stdout, out, _CHUNK)
                returncode = proc.wait(_GIT_TIMEOUT)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                proc.stdout.close()
            errors.seek(0)
            _check(args[0], returncode, errors.read(), (0,))


def _check(command: str, returncode: int, stderr: bytes, ok: tuple[int, ...]) -> None:
    if returncode not in ok:
        detail = stderr.decode("utf-8", "replace").strip()
        raise BaselineError(f"git {command} failed ({returncode}): {detail}")
