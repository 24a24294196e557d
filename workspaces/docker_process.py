"""A long-lived process in a conversation's container with its stdio attached: what the ACP
bridge runs an external agent (stdin, stdout, stderr) and each of its terminals as.

`ContainerProcess.start` creates an exec of its own (the container first, if it is not
running) and attaches to it with the docker SDK's low-level API (`exec_start(socket=True)`):
one socket whose reads are Docker's multiplexed frames (stdout and stderr told apart) and whose
writes are the process's stdin, half-closed for its end of file. The SDK is used rather than a
`docker exec -i` subprocess because the worker needs no docker CLI then, the engine's address
and credentials stay in this process, and the environment (secrets) travels in the API call
instead of the environment or command line of a CLI process on the worker; and because killing
that CLI would not end the process in the container anyway: its group is killed there, below.

Each exec is a session of its own in the container (runc makes it one), so the small launcher
(_GROUP_LAUNCH, plain bash) that execs the program is its process group's leader; it writes
its /proc stat line to a run directory first, exactly as DockerWorkspace's commands do, and
leaves a record in the state directory: `kill_group` signals that whole group in the container
(TERM, KILL after a grace), and a runner that died with it running leaves it to the next
runner's `DockerWorkspace.stop_leftovers`. Its environment is the container's own (the image's
ENV, and what Docker sets: HOSTNAME, HOME) plus exactly `env`; nothing of the worker's.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import ssl
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

import docker.errors

from workspaces.docker import (
    CONTAINER_RUNS,
    DockerWorkspace,
    DockerWorkspaceError,
    _leader,
    _raw_socket,
)
from workspaces.local import _RECORD_SUFFIX, _write_atomic

# `bash -c LAUNCH canvas-exec RUN_DIR PROGRAM ARG...`: record the group (its pid, a session's
# leader) before anything else, drop what bash itself exports, and become the program.
_GROUP_LAUNCH = r"""
read -r __canvas_stat < /proc/$$/stat
printf '%s\n' "$__canvas_stat" > "$1/command.pgid"
shift
unset -v __canvas_stat OLDPWD PWD
exec "$@"
"""

# `bash -c WHICH canvas-which PROGRAM`: how the launcher's exec would find it (same PATH).
_WHICH = r'command -v -- "$1" > /dev/null'

_EXIT_POLL_SECONDS = 0.05
GONE = -1
"""The exit code of a program whose container was removed while it ran."""


class ContainerProcess:
    """One program in the container. Use `start`; always `close` (idempotent). Blocking: an
    event loop calls these through a thread."""

    def __init__(
        self,
        workspace: DockerWorkspace,
        *,
        exec_id: str,
        sock: socket.socket,
        pending: bytes,
        run_dir: Path,
        record: Path,
    ) -> None:
        self.workspace = workspace
        self.exec_id = exec_id
        self.sock = sock
        """Blocking; owned by this object (or by whoever wraps it in a transport)."""
        self.pending = pending
        """Stream bytes read with the upgrade's headers: the first frames, before `sock`'s."""
        self._run_dir = run_dir
        self._record = record
        self._exit_code: int | None = None
        self._group_ended = False
        self._closed = False

    @classmethod
    def start(
        cls,
        workspace: DockerWorkspace,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str,
        stdin: bool,
    ) -> ContainerProcess:
        """Start `argv` (no shell) in the container in `cwd` (a container path) with `env`
        added to the container's own. Raises docker.errors.APIError or DockerWorkspaceError
        when the engine cannot start it."""
        name = f"run-{uuid.uuid4().hex}"
        run_dir = workspace.runs_dir / name
        record = workspace.state_dir / f"{name}{_RECORD_SUFFIX}"
        run_dir.mkdir(mode=0o700)
        try:
            _write_atomic(record, json.dumps({"container": workspace.container_name}).encode())
            launch = ["bash", "--noprofile", "--norc", "-c", _GROUP_LAUNCH, "canvas-exec",
                      f"{CONTAINER_RUNS}/{name}", *argv]  # fmt: skip
            exec_id = workspace._exec_create(launch, env=env, workdir=cwd, stdin=stdin)
            # After the exec is created: creating the container may have changed the owner.
            owner = workspace.file_owner()
            if owner is not None:
                os.lchown(run_dir, *owner)
            stream = workspace._api().exec_start(exec_id, socket=True)
            raw, pending = _raw_socket(stream)
            if isinstance(raw, ssl.SSLSocket):
                # Its bytes are TLS records, which a plain socket on the same descriptor (and
                # asyncio's transport over it) cannot read; the workspace's bind mounts need the
                # engine on this host anyway, over its unix socket or plain TCP.
                with contextlib.suppress(Exception):
                    stream.close()
                raise DockerWorkspaceError(
                    "attached processes (external agents, their terminals) need the Docker "
                    "engine over its unix socket or plain TCP, not TLS"
                )
            # A socket of our own on the same connection: the SDK's response objects may be
            # collected (and close theirs) while the process still runs.
            sock = socket.socket(fileno=os.dup(raw.fileno()))
            sock.setblocking(True)
            with contextlib.suppress(OSError):
                raw.close()
            with contextlib.suppress(Exception):
                stream.close()
        except BaseException:
            shutil.rmtree(run_dir, ignore_errors=True)
            record.unlink(missing_ok=True)
            raise
        return cls(
            workspace, exec_id=exec_id, sock=sock, pending=pending, run_dir=run_dir,
            record=record,
        )  # fmt: skip

    def exit_code(self) -> int | None:
        """The program's exit code once the engine has seen it end; None while it runs, and
        GONE when its container was removed under it (the engine forgets the exec then)."""
        if self._exit_code is None:
            try:
                info = self.workspace._api().exec_inspect(self.exec_id)
            except docker.errors.NotFound:
                self._exit_code = GONE
                return GONE
            if not info["Running"] and info["ExitCode"] is not None:
                self._exit_code = int(info["ExitCode"])
        return self._exit_code

    def wait(self, timeout: float | None = None) -> int | None:
        """Block until the program has ended (or `timeout`); its exit code, None if it runs."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.exit_code()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(_EXIT_POLL_SECONDS)
        return code

    def kill_group(self, *, grace: float = 0.0, signal: str = "TERM") -> bool:
        """Send `signal` to the program's whole group in the container, SIGKILL what is left
        after `grace` seconds; True when there was a group to signal."""
        dir_fd = _open_dir(self._run_dir)
        if dir_fd is None:
            return False
        try:
            leader = _leader(dir_fd)
        finally:
            os.close(dir_fd)
        if leader is None:  # the launcher never ran: nothing of it in the container
            return False
        steps = max(1, int(grace / 0.05))
        try:
            signalled = self.workspace._signal_group(*leader, signal=signal, steps=steps)
        except docker.errors.NotFound:
            signalled = False  # the container is gone, and the group with it
        # The kill ends with SIGKILL to the group, which no member survives nor escapes by
        # forking: nothing of it is left for `close` to kill again.
        self._group_ended = True
        return signalled

    def close(self) -> None:
        """Kill what is left of the group, drop the socket, the run directory and the record."""
        if self._closed:
            return
        self._closed = True
        if not self._group_ended:
            with contextlib.suppress(Exception):
                self.kill_group(signal="KILL")
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked reading it
        with contextlib.suppress(OSError):
            self.sock.close()
        shutil.rmtree(self._run_dir, ignore_errors=True)
        self._record.unlink(missing_ok=True)


def container_which(
    workspace: DockerWorkspace, command: str, *, env: Mapping[str, str], cwd: str
) -> bool:
    """True when `command` is found (or, with a slash, is executable) in the container under
    `env`'s PATH, or the image's own when `env` has none: as ContainerProcess would run it."""
    api = workspace._api()
    argv = ["bash", "--noprofile", "--norc", "-c", _WHICH, "canvas-which", command]
    exec_id = workspace._exec_create(argv, env=env, workdir=cwd)
    api.exec_start(exec_id)
    return workspace._exit_code(exec_id) == 0


def _open_dir(path: Path) -> int | None:
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
