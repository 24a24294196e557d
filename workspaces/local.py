"""A workspace that is a plain directory on this machine.

Each command runs in a fresh `bash`, yet `cd` and `export` carry over to the next command: the
shell's working directory and exported variables are written to the state directory when it
exits and restored when the next one starts. Nothing lives in memory, so successive commands may
come from different worker processes on the same host.

Variables given to one command through `run(extra_env=...)` (a team's secrets) are never saved:
neither they nor any exported variable whose value contains one of them reach the state file,
so a later command sees them only if it is given them again.

Every command goes through workspaces.sandbox: it sees the system's tools read-only, and
read-write only the workspace and a fresh per-command directory under the state directory that
holds its script and its saved state (the rest of the state directory, such as the file
editor's history, stays out of its reach). The worker copies the saved state back out of that
directory, refusing anything but regular files, so a command cannot plant a symlink there that
the worker would later follow. Network access is the team's (`network`, see
sandbox.effective_network). Where the sandbox is unavailable, `run` raises SandboxUnavailable
unless the site allows unsandboxed commands; then commands run as the worker's user, as plain
processes, and only paths and environment are kept apart.

The worker itself reads and writes the workspace's files (`read_text`, `write_text`, the file
editor) only through workspaces.fs, by directory handle, refusing links: a command running
alongside can swap any folder for a link at any moment. `resolve` and `current_dir` work from
the text of a path and never follow a name on the host.

A command dies with the process that started it (see workspaces.sandbox). For what that cannot
catch (a runner whose lease was taken over while its command ran, a launcher killed on its
own), a running command is recorded in the state directory, out of the command's reach: its
process group, the leader's start time and this machine's boot and PID namespace. The next
runner calls `stop_leftovers()` before running anything: it kills every recorded group that is
still the same group on this machine, and never a recycled pid or another machine's process.
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import json
import logging
import os
import re
import select
import shutil
import signal
import socket
import stat
import subprocess
import threading
import time
import uuid
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

from workspaces import browse, fs
from workspaces.base import (
    Cancel,
    CommandResult,
    DirEntry,
    ExtraEnv,
    FileChange,
    FileDiff,
    FileView,
    WorkspacePathError,
)
from workspaces.baseline import Baseline, BaselineError
from workspaces.outputs import OutputSpool
from workspaces.sandbox import PATH, Network, SandboxSpec, prepare

logger = logging.getLogger(__name__)

# Runs as `bash -c WRAPPER bash RUN_PREFIX ENV_FILE TRANSIENT_NAMES`. The command is read from
# RUN_PREFIX.sh and `eval`ed as data, so `cd`/`export` happen in this very shell and the command
# is never spliced into shell text (eval rather than source keeps the state path out of error
# messages). The EXIT trap runs on a normal end, `exit N` and SIGTERM; it uses only builtins
# because the command may have broken PATH. The `.done` file marks a complete save.
# TRANSIENT_NAMES (validated names, space-separated) came in the environment for this command
# only: their values are set aside (unexported) before the saved state is restored, win over
# it, and the save skips them and every variable whose value contains one of them.
_WRAPPER = r"""
__canvas_run=$1
__canvas_env=$2
__canvas_transient=$3
readonly __canvas_run __canvas_env __canvas_transient
__canvas_keep=()
for __canvas_name in $__canvas_transient; do __canvas_keep+=("${!__canvas_name}"); done
readonly __canvas_keep
if [[ -f $__canvas_env ]]; then source "$__canvas_env" 2>/dev/null; fi
__canvas_i=0
for __canvas_name in $__canvas_transient; do
  export "$__canvas_name=${__canvas_keep[__canvas_i]}"
  __canvas_i=$((__canvas_i + 1))
done
unset __canvas_i __canvas_name
__canvas_save() {
  local __canvas_rc=$? __canvas_name __canvas_value IFS=$' \t\n'
  set +eu
  for __canvas_name in $(compgen -e); do
    case " $__canvas_transient " in *" $__canvas_name "*) continue ;; esac
    for __canvas_value in "${__canvas_keep[@]}"; do
      [[ -n $__canvas_value && ${!__canvas_name} == *"$__canvas_value"* ]] && continue 2
    done
    case $__canvas_name in
      PWD|OLDPWD|SHLVL|_|BASHOPTS|SHELLOPTS|BASH_*|EUID|UID|PPID|COLUMNS|LINES) ;;
      *) declare -p "$__canvas_name" ;;
    esac
  done > "$__canvas_run.env" 2>/dev/null
  builtin cd -P . 2>/dev/null  # save the folder itself, not a link's name for it
  printf '%s' "$PWD" > "$__canvas_run.cwd"
  : > "$__canvas_run.done"
  exit "$__canvas_rc"
}
trap __canvas_save EXIT
eval "$(< "$__canvas_run.sh")"
"""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CWD_FILE = "cwd"
_ENV_FILE = "env.sh"
_KILL_GRACE_SECONDS = 1.0
_DRAIN_SECONDS = 0.5
_MAX_STATE_BYTES = 4 * 1024 * 1024
MAX_TEXT_BYTES = 64 * 1024 * 1024
"""The largest file `read_text` reads."""
_RECORD_SUFFIX = ".pid"
_STOP_WAIT_SECONDS = 5.0


def _base_environment(home: Path) -> dict[str, str]:
    """A clean starting environment: nothing from the worker's own (secrets included) leaks in."""
    return {
        "PATH": PATH,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "PAGER": "cat",
        "GIT_PAGER": "cat",
        "PYTHONUNBUFFERED": "1",
    }


class _BoundedText:
    """Keeps the first and last characters of a stream and counts what fell in between.

    Memory stays bounded however much a command prints (think `yes`). With a `spool`, the
    whole stream also goes to a file once it is longer than the limit (workspaces.outputs),
    and the cut names that file.
    """

    def __init__(self, max_chars: int, spool: OutputSpool | None = None) -> None:
        self._head_limit = max_chars // 2
        self._tail_limit = max_chars - self._head_limit
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self.dropped = 0
        self._spool = spool

    def add(self, text: str) -> None:
        spool = self._spool
        if spool is not None and spool.started:
            spool.write(text)
        room = self._head_limit - self._head_len
        if room > 0:
            self._head.append(text[:room])
            self._head_len += len(self._head[-1])
            text = text[room:]
        if not text:
            return
        self._tail.append(text)
        self._tail_len += len(text)
        if (
            self._tail_len > self._tail_limit
            and spool is not None
            and not spool.started
            and not spool.failed
        ):  # the first cut: what was kept so far is everything so far
            spool.write("".join(self._head) + "".join(self._tail))
        while self._tail_len > self._tail_limit:
            excess = self._tail_len - self._tail_limit
            first = self._tail[0]
            if len(first) <= excess:
                self._tail.popleft()
                cut = len(first)
            else:
                self._tail[0] = first[excess:]
                cut = excess
            self._tail_len -= cut
            self.dropped += cut

    def text(self) -> str:
        head, tail = "".join(self._head), "".join(self._tail)
        if not self.dropped:
            return head + tail
        note = (
            self._spool.note(self.dropped)
            if self._spool is not None
            else f"[... {self.dropped} characters cut ...]"
        )
        return f"{head}\n{note}\n{tail}"

    @property
    def spooled(self) -> str | None:
        """The whole output's file, relative to the workspace root, when there is one."""
        spool = self._spool
        return spool.relative if spool is not None and spool.started and not spool.failed else None

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()


class LocalWorkspace:
    def __init__(
        self,
        root: Path,
        state_dir: Path,
        *,
        max_output_chars: int = 30_000,
        env: Mapping[str, str] | None = None,
        network: Network = "none",
    ) -> None:
        """`env` is added to the clean base environment of every command (e.g. granted
        secrets); `network` is what the team's policy asks for (the site may refuse "host")."""
        Path(root).mkdir(parents=True, exist_ok=True)
        Path(state_dir).mkdir(parents=True, exist_ok=True)
        self.root = Path(os.path.realpath(root))
        self.state_dir = Path(os.path.realpath(state_dir))
        self.max_output_chars = max_output_chars
        self.network = network
        self._env = {**_base_environment(self.root), **(env or {})}

    # -- paths -------------------------------------------------------------------------------

    def current_dir(self) -> Path:
        """The terminal's saved working directory, or root when it is unset, gone, outside or
        reached through a link. Worked out from the saved text, then checked by handle
        (workspaces.fs): no name the agent controls is followed on the host."""
        saved = _read_regular(self.state_dir / _CWD_FILE)
        try:
            parts = self._cwd_parts(saved.decode("utf-8")) if saved else []
        except (UnicodeDecodeError, WorkspacePathError):
            return self.root
        return self.root.joinpath(*parts) if fs.is_dir(self.root, parts) else self.root

    def _cwd_parts(self, saved: str) -> list[str]:
        """The saved cwd (the shell's absolute $PWD) as components under root."""
        if not saved.startswith("/"):
            raise WorkspacePathError("the saved directory is not an absolute path")
        return fs.relative_parts(self.root, saved)

    def resolve(self, path: str) -> Path:
        """As the protocol says: lexical, `..` folded from the text alone, nothing on disk
        followed (the path may not exist, or hold a link that opening it will refuse)."""
        return self.root.joinpath(*self.parts(path))

    def parts(self, path: str) -> list[str]:
        """`path` (absolute, or relative to the current directory) as components under root,
        for workspaces.fs; WorkspacePathError when it lands outside or is not a valid path."""
        if "\0" in path:
            raise WorkspacePathError(f"path {path!r} is not a valid path")
        cwd = None if path.startswith("/") else self.current_dir()
        return fs.relative_parts(self.root, path, cwd=cwd)

    def as_agent_sees(self, text: str) -> str:
        return text  # the sandbox mounts the workspace at its own path

    def read_text(self, path: str) -> str:
        """Strict UTF-8 (raises UnicodeDecodeError); line endings are kept as they are on disk.
        Opened by handle; FileTooLarge past MAX_TEXT_BYTES."""
        return fs.read_bytes(self.root, self.parts(path), limit=MAX_TEXT_BYTES).decode("utf-8")

    def write_text(self, path: str, content: str, *, exclusive: bool = False) -> Path:
        """Write by handle, making missing folders (given to `file_owner()`); see the
        protocol."""
        parts = self.parts(path)
        data = content.encode("utf-8")
        fs.write_owned(
            self.root, parts, data, owner=self.file_owner(), exclusive=exclusive,
            make_parents=True,
        )  # fmt: skip
        return self.root.joinpath(*parts)

    def file_owner(self) -> tuple[int, int] | None:
        """Who should own what the worker creates in the workspace (None: as it is made)."""
        return None

    def state_path(self, name: str) -> Path:
        if not name or name in {".", ".."} or "/" in name or "\0" in name:
            raise ValueError(f"invalid state file name {name!r}")
        return self.state_dir / name

    # -- commands ----------------------------------------------------------------------------

    def run(
        self, command: str, *, timeout: float, extra_env: ExtraEnv = None, cancel: Cancel = None
    ) -> CommandResult:
        """Run `command`; `extra_env` is in its environment only and never saved for later
        commands (see the module docstring)."""
        transient = transient_env(extra_env)
        run_dir = self.state_dir / f"run-{uuid.uuid4().hex}"
        run_dir.mkdir()
        prefix = run_dir / "command"
        try:
            prefix.with_suffix(".sh").write_text(command, encoding="utf-8")
            with contextlib.suppress(FileNotFoundError):
                shutil.copyfile(self.state_dir / _ENV_FILE, run_dir / _ENV_FILE)
            spec = SandboxSpec(
                cwd=self.current_dir(),
                writable=(self.root, run_dir),
                env={**self._env, **transient},
                network=self.network,
            )
            argv = [
                "bash",
                "--noprofile",
                "--norc",
                "-c",
                _WRAPPER,
                "bash",
                str(prefix),
                str(run_dir / _ENV_FILE),
                " ".join(transient),
            ]
            with prepare(spec, argv) as launch:
                proc = launch.popen(
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
                )
            output = _BoundedText(self.max_output_chars, OutputSpool(self.root, str(self.root)))
            record = self.record_command(proc.pid, name=run_dir.name)
            try:
                # The leader (bwrap, or the unsandboxed launcher) ends with the shell: spare
                # it the SIGTERM so the shell gets to save its state before the group goes.
                timed_out, cancelled = _collect(proc, output, timeout, cancel, spare_leader=True)
            finally:
                record.unlink(missing_ok=True)
                output.close()
            exit_code = None if timed_out or cancelled else proc.returncode
            self._commit_state(prefix)
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
        return CommandResult(
            output=output.text(),
            exit_code=exit_code,
            timed_out=timed_out,
            truncated=output.dropped > 0,
            interrupted=cancelled,
            output_file=output.spooled,
        )

    def record_command(
        self, pgid: int, *, name: str | None = None, start_ticks: int | None = None,
        host: str | None = None,
    ) -> Path:  # fmt: skip
        """Note a running process group for `stop_leftovers`; the caller unlinks the returned
        file when the group is gone. `start_ticks` and `host` default to the leader's and this
        machine's (tests give others)."""
        record = {
            "host": host or _this_host(),
            "pgid": pgid,
            "start": _start_ticks(pgid) if start_ticks is None else start_ticks,
        }
        path = self.state_dir / f"{name or f'run-{uuid.uuid4().hex}'}{_RECORD_SUFFIX}"
        _write_atomic(path, json.dumps(record).encode())
        return path

    def stop_leftovers(self) -> int:
        """Kill every recorded command group still running on this machine (a previous runner's),
        wait until it is gone, and clear its record; returns how many groups were killed.
        Records of another machine are left for it. Call before running anything."""
        killed = 0
        for path in self.state_dir.glob(f"run-*{_RECORD_SUFFIX}"):
            try:
                record = json.loads(path.read_bytes())
                host, pgid, start = record["host"], int(record["pgid"]), int(record["start"])
            except (OSError, ValueError, KeyError, TypeError):
                path.unlink(missing_ok=True)
                continue
            if host != _this_host():
                logger.warning("command group %s was left running on %s, not here", pgid, host)
                continue
            if _stop_group(pgid, start):
                killed += 1
                logger.warning("stopped command group %s left by a previous runner", pgid)
            shutil.rmtree(path.with_suffix(""), ignore_errors=True)
            path.unlink(missing_ok=True)
        return killed

    def _commit_state(self, prefix: Path, *, dir_fd: int | None = None) -> None:
        """Adopt the shell's saved cwd and env, but only if its EXIT trap finished writing them.

        The command could write anything in its run directory: only regular files are read
        (never through a symlink), and they are written afresh into the state directory. With
        `dir_fd`, `prefix` is relative to that open directory (which cannot be swapped)."""
        if _read_regular(prefix.with_suffix(".done"), dir_fd=dir_fd) is None:
            return
        env, cwd = (
            _read_regular(prefix.with_suffix(".env"), dir_fd=dir_fd),
            _read_regular(prefix.with_suffix(".cwd"), dir_fd=dir_fd),
        )
        if env is None or cwd is None:
            return
        _write_atomic(self.state_dir / _ENV_FILE, env)
        _write_atomic(self.state_dir / _CWD_FILE, cwd)

    # -- looking at it from outside (workspaces.baseline, workspaces.browse) ------------------

    def baseline_take(self) -> bool:
        """As the protocol says; a baseline that cannot be taken (no git, a workspace too big
        for its time limit) is logged and leaves the Changes panel empty, the run unharmed."""
        try:
            return Baseline(self.root, self.state_dir).take()
        except (BaselineError, OSError, subprocess.TimeoutExpired):
            logger.exception("no baseline for the workspace %s", self.root)
            return False

    def changes(self) -> list[FileChange]:
        return Baseline(self.root, self.state_dir).changes()

    def diff(self, path: str) -> FileDiff:
        return Baseline(self.root, self.state_dir).diff(path)

    def list_files(self, path: str) -> list[DirEntry]:
        return browse.list_files(self.root, path)

    def read_file(self, path: str) -> FileView:
        return browse.read_file(self.root, path)

    def archive(self, out: BinaryIO) -> None:
        Baseline(self.root, self.state_dir).archive(out, prefix=self.root.name)


def transient_env(extra_env: Mapping[str, str] | None) -> dict[str, str]:
    """`run(extra_env=...)` as a dict, its names checked (the wrapper splices them in)."""
    transient = dict(extra_env or {})
    for name in transient:
        if not _ENV_NAME.fullmatch(name):
            raise ValueError(f"invalid environment variable name {name!r}")
    return transient


def _read_regular(path: Path, *, dir_fd: int | None = None) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_STATE_BYTES:
            return None
        return f.read(_MAX_STATE_BYTES)


def _write_atomic(path: Path, data: bytes) -> None:
    partial = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    partial.write_bytes(data)
    os.replace(partial, path)


def _collect(
    proc: subprocess.Popen[bytes],
    output: _BoundedText,
    timeout: float,
    cancel: threading.Event | None = None,
    *,
    spare_leader: bool = False,
) -> tuple[bool, bool]:
    """Read the merged output until the shell ends, time runs out or `cancel` is set; returns
    (timed out, cancelled). Either way the command's whole process group is killed.

    Reading stops shortly after the shell exits even if a background job still holds the pipe
    open; such a job keeps running (and should redirect its own output) until the command's
    sandbox ends, which under bubblewrap is when the command does.
    """
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    deadline = time.monotonic() + timeout
    timed_out = cancelled = eof = False
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (cancel is not None and cancel.is_set()):
                timed_out, cancelled = remaining <= 0, remaining > 0
                _kill_group(proc, spare_leader=spare_leader)
                _drain(fd, decoder, output, time.monotonic() + _DRAIN_SECONDS)
                break
            exited = proc.poll() is not None
            if eof:  # the shell closed its output but may still be running
                if exited:
                    break
                # Output ends a moment before the leader does: wait for it, not a fixed nap.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(min(remaining, 0.05))
            elif select.select([fd], [], [], 0.05 if exited else min(remaining, 0.2))[0]:
                chunk = os.read(fd, 65536)
                eof = not chunk
                output.add(decoder.decode(chunk))
            elif exited:
                break
        output.add(decoder.decode(b"", final=True))
    finally:
        if proc.poll() is None:  # interrupted by an exception: leave nothing running
            _kill_group(proc)
        proc.stdout.close()
        proc.wait()
    return timed_out, cancelled


def _drain(fd: int, decoder: codecs.IncrementalDecoder, output: _BoundedText, until: float) -> None:
    while (remaining := until - time.monotonic()) > 0:
        if not select.select([fd], [], [], remaining)[0]:
            return
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        output.add(decoder.decode(chunk))


def _kill_group(proc: subprocess.Popen[bytes], *, spare_leader: bool = False) -> None:
    """SIGTERM the command's whole process group (all but its leader when `spare_leader`:
    the leader ends when its command does), then SIGKILL whatever outlives a grace period."""
    pgid = proc.pid  # start_new_session made the leader's pid the group id
    try:
        if spare_leader:
            for pid in _group_members(pgid):
                if pid != pgid:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGTERM)
        else:
            os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + _KILL_GRACE_SECONDS
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader, or its zombie keeps the group alive
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _group_members(pgid: int) -> list[int]:
    """Pids in process group `pgid`, read from /proc (Linux, as is the sandbox that asks)."""
    return [pid for pid, _ in _group_stats(pgid)]


def _group_stats(pgid: int) -> list[tuple[int, list[bytes]]]:
    """(pid, /proc/<pid>/stat fields after the command name) of each process in group `pgid`;
    fields[0] is the state, fields[2] the group, fields[19] the start time in clock ticks."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is not None and int(fields[2]) == pgid:
            members.append((int(entry.name), fields))
    return members


def _stat_fields(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_ticks(pid: int) -> int:
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else -1


@functools.cache
def _this_host() -> str:
    """This kernel's boot and PID namespace: a pid means the same process only where both match
    (a container on the same machine has its own pids; a reboot recycles them all)."""
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return f"{socket.gethostname()}/{boot}/{os.readlink('/proc/self/ns/pid')}"


def _stop_group(pgid: int, start: int) -> bool:
    """SIGKILL the recorded group if it is still the one recorded, then wait (bounded) until
    only zombies are left of it. A group outlives its leader, but its id cannot name another
    group until every member has gone; members that started before the recorded leader belong
    to some other group that reused the id, and are spared."""
    members = [
        pid for pid, fields in _group_stats(pgid)
        if fields[0] not in (b"Z", b"X") and int(fields[19]) >= start
    ]  # fmt: skip
    leader = _stat_fields(pgid)
    if leader is not None and int(leader[19]) != start:
        return False  # the id is a newer process's: ours are gone
    if not members:
        return False
    if leader is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    else:
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + _STOP_WAIT_SECONDS
    while time.monotonic() < deadline and any(
        fields[0] not in (b"Z", b"X") for _, fields in _group_stats(pgid)
    ):
        time.sleep(0.02)
    return True
