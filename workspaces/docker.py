"""A workspace whose commands run in a Docker container of their own, one per conversation.

The directory stays on the worker's host, as for LocalWorkspace, and is bind-mounted at
/workspace; so everything that looks at the files from outside (read/write, baseline, changes,
files, archive) is LocalWorkspace's, unchanged. Only commands differ: they run in the
container `canvas-<conversation id>`, created lazily by the first command (and again if it
vanished), from the team's image, with `init`, no capabilities, no-new-privileges, the CPU /
memory / pids limits and the network mode ("none" or "bridge") given. The only host paths it sees are the workspace and a runs directory in the state
directory (state_dir/docker-runs at /canvas/runs), where each command gets a fresh directory
for its script and its saved state, exactly as under the local sandbox: the same wrapper
(local._WRAPPER) keeps `cd` and `export` across commands, even from different worker
processes, and never saves what `run(extra_env=...)` gave one command. Nothing of the worker's
own environment reaches the container: it is created with none, and each command gets the
clean base environment plus what the caller grants.

Owners: a worker running as root runs the container as the image's user (non-root where the
image has one) and hands the workspace tree to that user when it creates the container, so
the agent can write it; files the worker writes later are given to the same owner. A worker
that is not root runs the container as its own uid:gid, so both sides own the same files.

An exec costs 50-70 ms of the engine's own (runc joining the container's namespaces and
cgroups), so commands are not started with one each: a small dispatcher (_DISPATCH, plain
bash), started in the container by one exec when no one reads its FIFO, takes each command as
a message through that FIFO in the runs directory (the worker's non-blocking open fails with
ENXIO when it is gone: a restart, a kill) and starts the same launcher. Output comes back
through a FIFO in the command's run directory (a pipe, so a `yes` fills no disk), exit code
and saved state through its files, all read through the run directory's open descriptor. The
command's environment, secrets included, travels in the message, never in a file. Where the
dispatcher cannot run (an image without setsid) or a message cannot go in one piece (more than
PIPE_BUF bytes), the command runs with an exec of its own, with the same result; one the
dispatcher took and died without starting is run that way too.

Either way a command is a session of its own in the container (runc makes each exec one; the
dispatcher uses setsid), so its process group is the launcher's pid, which the launcher writes
to its run directory first thing. A timed-out or interrupted command's group is killed with an
exec (SIGTERM, then SIGKILL after a grace); where even that exec cannot start (a fork bomb
holding every pid), the container is restarted. A command's record in the state directory lets
the next runner's `stop_leftovers` kill what a dead runner left running in the container.

The container is the boundary (see DESIGN.md): whatever runs in it sees only the container's
processes, its own environment and the two mounts. A process a command leaves behind outside
its group (setsid) could read the dispatcher's FIFO, and so a later command's secrets; it could
as well read them from that command's /proc/PID/environ under exec, so this opens nothing new.
"""

from __future__ import annotations

import codecs
import contextlib
import fcntl
import io
import json
import logging
import os
import re
import select
import shutil
import socket
import stat
import tarfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import docker
import docker.errors

from workspaces import fs
from workspaces.base import (
    Cancel,
    CommandResult,
    ExtraEnv,
    WorkspacePathError,
    WorkspaceUnavailable,
)
from workspaces.fs_tree import chown_tree
from workspaces.local import (
    _DRAIN_SECONDS,
    _ENV_FILE,
    _ENV_NAME,
    _KILL_GRACE_SECONDS,
    _RECORD_SUFFIX,
    _WRAPPER,
    LocalWorkspace,
    _base_environment,
    _BoundedText,
    _read_regular,
    _write_atomic,
    transient_env,
)
from workspaces.local import _drain as _drain_fd
from workspaces.outputs import OutputSpool
from workspaces.spec import ContainerLimits

logger = logging.getLogger(__name__)

DockerNetwork = Literal["none", "bridge"]

CONTAINER_ROOT = "/workspace"
CONTAINER_RUNS = "/canvas/runs"
LABEL_MANAGED = "canvas.managed"
LABEL_CONVERSATION = "canvas.conversation"
LABEL_TEAM = "canvas.team"
_RUNS_DIR = "docker-runs"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_FRAME_HEADER = 8
_AVAILABLE_TTL_SECONDS = 5.0
_ENGINE_TIMEOUT_SECONDS = 30
_KILL_ATTEMPTS = 3
# Each dispatcher reads a FIFO of its own in the runs directory (the container must open it),
# named in a file of the state directory, out of the container's reach: one that starts too
# late to be used finds its FIFO gone (or never written to) instead of sharing the next one's.
_DISPATCH_POINTER = "dispatcher"
_DISPATCH_FIFO = re.compile(r"dispatch-[0-9a-f]{32}")
_DISPATCH_LOCK = "dispatcher.lock"  # in the state directory, out of the container's reach
_DISPATCH_REFUSED = "dispatcher.refused"  # the id of a container that cannot run it
_DISPATCH_NO_SETSID = 3
_DISPATCH_START_SECONDS = 3.0
_DISPATCH_NUDGE_SECONDS = 0.2
_DISPATCH_LOST_SECONDS = 1.0
_POLL_FIRST_SECONDS = 0.002
_POLL_LAST_SECONDS = 0.05

# `bash -c LAUNCH bash RUN_PREFIX ENV_FILE TRANSIENT_NAMES WRAPPER`. The launcher writes its
# /proc stat line first thing (its pid is the command's process group: it is a session of its
# own, an exec's or the dispatcher's setsid), runs local._WRAPPER as a child, and when that ends kills what the command left
# in its group, so no job outlives its command (as under the local sandbox). Its TERM trap
# only makes it wait for the wrapper, which saves its state on the way out. stderr goes into
# stdout, one stream, so the output keeps the order it was written in (as local's one pipe).
# Its exit code, written last, spares asking the engine (which may not have noted it yet).
_LAUNCH = r"""
exec 2>&1
read -r __canvas_stat < /proc/$$/stat
printf '%s\n' "$__canvas_stat" > "$1.pgid"
trap : TERM
bash --noprofile --norc -c "$4" bash "$1" "$2" "$3"
__canvas_rc=$?
for __canvas_pass in 1 2 3; do
  __canvas_left=0
  for __canvas_stat in /proc/[0-9]*/stat; do
    read -r __canvas_line 2>/dev/null < "$__canvas_stat" || continue
    read -r -a __canvas_fields <<< "${__canvas_line##*) }"
    if [[ ${__canvas_fields[2]} == "$$" && ${__canvas_line%% *} != "$$" ]]; then
      kill -KILL "${__canvas_line%% *}" 2>/dev/null && __canvas_left=1
    fi
  done
  ((__canvas_left)) || break
done
printf '%s' "$__canvas_rc" > "$1.rc"
exit "$__canvas_rc"
"""

# `bash -c KILL bash PGID START SIGNAL GRACE_STEPS`: signal the group unless its leader is
# alive with another start time (a reused pid), then wait for it to go, SIGKILL after the
# grace. It forks nothing (bash would retry a fork for 15 s when a fork bomb holds every pid):
# it naps by waiting on its stdin, which the engine holds open and nothing writes to.
# Exits 0 when the group is gone, 2 when there was none, 3 when the pid is another's.
_KILL = r"""
pgid=$1 start=$2 sig=$3 steps=$4
if read -r -a stat < "/proc/$pgid/stat" 2>/dev/null && [[ ${stat[21]} != "$start" ]]; then
  exit 3
fi
kill "-$sig" -- "-$pgid" 2>/dev/null || exit 2
for ((i = 0; i < steps; i++)); do
  read -r -t 0.05 _
  kill -0 -- "-$pgid" 2>/dev/null || exit 0
done
kill -KILL -- "-$pgid" 2>/dev/null
exit 0
"""


# `bash -c DISPATCH canvas-dispatch FIFO LAUNCH WRAPPER`, started by one exec and left
# running: it reads commands from FIFO and starts each as the exec path would, without an exec
# (runc joining the container's namespaces and cgroups costs 50-70 ms an exec). A message is
# NUL-terminated fields: the run directory's name, the cwd, the transient names (as _LAUNCH's
# $3), then NAME=VALUE pairs ending with an empty field; the pairs are the command's whole
# environment on top of the container's, secrets included, so they only ever pass through
# the pipe. Each command gets a subshell that drops the FIFO, takes that environment (SHLVL
# and OLDPWD reset, as in a fresh exec), and starts _LAUNCH in a session of its own (setsid),
# so its pid is again its group; stdin is /dev/null, stdout the run directory's output FIFO
# (opened read-write: never waits for a reader). The subshell waits for it and writes its
# status as command.rc if the launcher could not (killed: OOM), which the exec path asks the
# engine for. The FIFO is held read-write too: a read waits for the next message instead of
# seeing an end of file, and the worker's non-blocking open fails (ENXIO) once it is gone.
_DISPATCH = r"""
command -v setsid > /dev/null || exit 3
exec 3<> "$1" || exit 4
launch=$2 wrapper=$3
while IFS= read -r -d '' run <&3 && IFS= read -r -d '' cwd <&3 &&
    IFS= read -r -d '' transient <&3; do
  env=()
  while IFS= read -r -d '' pair <&3 && [[ -n $pair ]]; do env+=("$pair"); done
  [[ $run =~ ^run-[0-9a-f]{32}$ ]] || continue
  (
    exec 3<&-
    dir=/canvas/runs/$run
    cd -- "$cwd" 2> /dev/null || cd /workspace || exit
    unset OLDPWD
    export SHLVL=0
    for pair in "${env[@]}"; do
      [[ ${pair%%=*} =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] && export "$pair"
    done
    [[ -p $dir/command.out ]] || exit
    setsid bash --noprofile --norc -c "$launch" bash "$dir/command" "$dir/env.sh" \
      "$transient" "$wrapper" < /dev/null 1<> "$dir/command.out" 2>&1
    rc=$?
    [[ -e $dir/command.rc ]] || printf '%s' "$rc" > "$dir/command.rc"
  ) &
done
"""


class _DispatchLost(Exception):
    """The dispatcher went away with a command it had not started."""


class DockerWorkspaceError(WorkspaceUnavailable):
    """The engine or the image is not there; the message says what to do about it."""


DockerLimits = ContainerLimits
"""A container's resources (workspaces.spec); a workspace made without any gets DEFAULT_LIMITS."""
DEFAULT_LIMITS = ContainerLimits(pids=256)


class DockerWorkspace(LocalWorkspace):
    def __init__(
        self,
        root: Path,
        state_dir: Path,
        *,
        conversation_id: str,
        team_id: int,
        image: str,
        limits: DockerLimits = DEFAULT_LIMITS,
        network: DockerNetwork = "none",
        env: Mapping[str, str] | None = None,
        max_output_chars: int = 30_000,
        client_factory: Callable[[], docker.DockerClient] = docker.from_env,
    ) -> None:
        """`env` is added to every command's clean environment (granted secrets); it is given
        to each exec, never to the container, so `docker inspect` and /proc/1 do not show it."""
        if not _NAME.fullmatch(conversation_id):
            raise ValueError(f"invalid conversation id {conversation_id!r}")
        if network not in ("none", "bridge"):
            raise ValueError(f"invalid network mode {network!r}")
        super().__init__(root, state_dir, max_output_chars=max_output_chars)
        self.network = network  # type: ignore[assignment]  # Docker's modes, not the sandbox's
        self.conversation_id = conversation_id
        self.team_id = team_id
        self.image = image
        self.limits = limits
        self.container_name = f"canvas-{conversation_id}"
        self.runs_dir = self.state_dir / _RUNS_DIR
        self.runs_dir.mkdir(exist_ok=True)
        # The image's own PATH (its toolchain) and locales stay: they are the image's to set.
        base = _base_environment(Path(CONTAINER_ROOT))
        for name in ("PATH", "LANG", "LC_ALL"):
            del base[name]
        self._env = {**base, **(env or {})}
        self._client_factory = client_factory
        self._client: docker.DockerClient | None = None

    # -- paths -------------------------------------------------------------------------------

    def _cwd_parts(self, saved: str) -> list[str]:
        """The saved container cwd (/workspace/...) as components under the host folder."""
        if saved != CONTAINER_ROOT and not saved.startswith(CONTAINER_ROOT + "/"):
            raise WorkspacePathError("the saved directory is outside the workspace")
        return fs.relative_parts(self.root, f"{self.root}{saved[len(CONTAINER_ROOT) :]}")

    def parts(self, path: str) -> list[str]:
        """As LocalWorkspace, with the agent's view of paths: `/workspace/...` is the root, and
        a refusal names the path as the agent gave it, never the host folder."""
        inside = path == CONTAINER_ROOT or path.startswith(CONTAINER_ROOT + "/")
        try:
            return super().parts(f"{self.root}{path[len(CONTAINER_ROOT) :]}" if inside else path)
        except WorkspacePathError as exc:
            problem = "is not a valid path" if "not a valid path" in str(exc) else (
                f"is outside the workspace ({CONTAINER_ROOT})"
            )  # fmt: skip
            raise WorkspacePathError(f"path {path!r} {problem}") from None

    def as_agent_sees(self, text: str) -> str:
        # The host folder where it stands as a whole path component, not inside a longer name.
        return re.sub(rf"{re.escape(str(self.root))}(?![^/\s'\"),.:;])", CONTAINER_ROOT, text)

    def _container_cwd(self) -> str:
        relative = self.current_dir().relative_to(self.root)
        return CONTAINER_ROOT if relative == Path(".") else f"{CONTAINER_ROOT}/{relative}"

    def file_owner(self) -> tuple[int, int] | None:
        """Who should own what the worker creates in the workspace for the container (None:
        leave it as it is)."""
        return self._owner()

    def _owner(self) -> tuple[int, int] | None:
        """Who should own what a root worker creates for the container: the workspace root's
        owner (the container's user since the container was created); None when not root."""
        if os.geteuid() != 0:
            return None
        info = self.root.stat()
        return None if info.st_uid == 0 else (info.st_uid, info.st_gid)

    # -- the container -----------------------------------------------------------------------

    def _api(self) -> docker.APIClient:
        if self._client is None:
            try:
                client = self._client_factory()
                client.ping()
            except docker.errors.DockerException as exc:
                raise DockerWorkspaceError(_no_engine(exc)) from exc
            self._client = client
        return self._client.api

    def container_status(self) -> str | None:
        """The container's state ("running", "paused", "exited", ...); None when it has none."""
        try:
            return self._api().inspect_container(self.container_name)["State"]["Status"]
        except docker.errors.NotFound:
            return None

    def ensure_container(self) -> str:
        """The running container's id: created, started or unpaused as needed."""
        api = self._api()
        try:
            info = api.inspect_container(self.container_name)
        except docker.errors.NotFound:
            info = self._create()
        state = info["State"]
        if state.get("Paused"):
            with contextlib.suppress(docker.errors.APIError):  # someone else unpaused it
                api.unpause(info["Id"])
        elif not state.get("Running"):
            api.start(info["Id"])  # a no-op (304) when another process started it first
        return info["Id"]

    def _create(self) -> dict[str, Any]:
        api = self._api()
        try:
            image = api.inspect_image(self.image)
        except docker.errors.ImageNotFound as exc:
            raise DockerWorkspaceError(f"image {self.image!r} is not on this engine") from exc
        except docker.errors.APIError as exc:
            raise DockerWorkspaceError(f"image {self.image!r}: {exc.explanation}") from exc
        worker_root = os.geteuid() == 0
        user = (image.get("Config") or {}).get("User") or ""
        if not worker_root:
            user = f"{os.getuid()}:{os.getgid()}"
        limits = self.limits
        host_config = api.create_host_config(
            binds={
                str(self.root): {"bind": CONTAINER_ROOT, "mode": "rw"},
                str(self.runs_dir): {"bind": CONTAINER_RUNS, "mode": "rw"},
            },
            init=True,
            network_mode=self.network,
            nano_cpus=int(limits.cpus * 1e9) if limits.cpus else None,
            mem_limit=f"{limits.memory_mb}m" if limits.memory_mb else None,
            # Swap equal to memory: a hog is killed at the limit instead of swapping.
            memswap_limit=f"{limits.memory_mb}m" if limits.memory_mb else None,
            pids_limit=limits.pids,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
        )
        try:
            created = api.create_container(
                self.image,
                entrypoint=["sleep", "infinity"],
                name=self.container_name,
                user=user,
                working_dir=CONTAINER_ROOT,
                labels={
                    LABEL_MANAGED: "1",
                    LABEL_CONVERSATION: self.conversation_id,
                    LABEL_TEAM: str(self.team_id),
                },
                host_config=host_config,
            )
        except docker.errors.APIError as exc:
            if exc.status_code != 409:
                raise DockerWorkspaceError(
                    f"cannot create {self.container_name}: {exc.explanation}"
                ) from exc
            # Another process created it first: use theirs (the name can be taken a moment
            # before the container answers to it).
            deadline = time.monotonic() + _ENGINE_TIMEOUT_SECONDS
            while True:
                try:
                    return api.inspect_container(self.container_name)
                except docker.errors.NotFound:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        if worker_root and user:
            self._hand_over(created["Id"], user)
        return api.inspect_container(created["Id"])

    def _hand_over(self, container_id: str, user: str) -> None:
        """Give the workspace tree to the container's user, so the agent can write what the
        worker (root) cloned or wrote before the container existed. By handle
        (fs_tree.chown_tree): a command of a container sharing the folder may swap a folder
        for a link meanwhile, and root must not change an owner through it."""
        owner = _resolve_user(self._api(), container_id, user)
        if owner is None or owner[0] == 0:
            return
        root = fs.open_root(self.root)
        try:
            chown_tree(root, owner)
        finally:
            os.close(root)

    def pause(self) -> None:
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            self._api().pause(self.container_name)  # 409 when not running: nothing to pause

    def resume(self) -> None:
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            self._api().unpause(self.container_name)

    def close(self) -> None:
        """Stop and remove the container (its processes with it); the directory stays."""
        with contextlib.suppress(docker.errors.NotFound):
            self._api().remove_container(self.container_name, force=True, v=True)

    # -- commands ----------------------------------------------------------------------------

    def run(
        self, command: str, *, timeout: float, extra_env: ExtraEnv = None, cancel: Cancel = None
    ) -> CommandResult:
        """As LocalWorkspace.run, in the container (see the module docstring)."""
        transient = transient_env(extra_env)
        name = f"run-{uuid.uuid4().hex}"
        message = _message(name, self._container_cwd(), {**self._env, **transient}, transient)
        dispatcher = None if message is None else self._dispatcher()
        if dispatcher is not None:
            try:
                return self._run(name, command, timeout, transient, cancel, (dispatcher, message))
            except _DispatchLost:
                # It took the message and died before starting it: nothing ran, so run it the
                # slow way (the next command restarts the dispatcher).
                logger.warning("%s: the dispatcher went away; using exec", self.container_name)
                name = f"run-{uuid.uuid4().hex}"
            finally:
                os.close(dispatcher)
        return self._run(name, command, timeout, transient, cancel, None)

    def _run(
        self,
        name: str,
        command: str,
        timeout: float,
        transient: dict[str, str],
        cancel: threading.Event | None,
        dispatch: tuple[int, bytes] | None,
    ) -> CommandResult:
        """One command in the run directory `name`: handed to the dispatcher when `dispatch`
        (its FIFO and the message) is given, else run with an exec."""
        run_dir = self.runs_dir / name
        record = self.state_dir / f"{name}{_RECORD_SUFFIX}"
        run_dir.mkdir(mode=0o700)
        # Everything in the run directory is reached through this descriptor: a process left
        # in the container could swap the directory for a symlink, never the open directory.
        dir_fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        output = _BoundedText(
            self.max_output_chars, OutputSpool(self.root, CONTAINER_ROOT, owner=self._owner())
        )
        try:
            _write_new(dir_fd, "command.sh", command.encode())
            saved_env = _read_regular(self.state_dir / _ENV_FILE)
            if saved_env is not None:
                _write_new(dir_fd, _ENV_FILE, saved_env)
            _write_atomic(record, json.dumps({"container": self.container_name}).encode())
            if dispatch is not None:
                timed_out, cancelled = self._dispatch(*dispatch, dir_fd, output, timeout, cancel)
                exit_code = None if timed_out or cancelled else _await_exit_code(dir_fd)
            else:
                prefix = f"{CONTAINER_RUNS}/{name}/command"
                argv = ["bash", "--noprofile", "--norc", "-c", _LAUNCH, "bash", prefix,
                        f"{CONTAINER_RUNS}/{name}/{_ENV_FILE}", " ".join(transient), _WRAPPER]  # fmt: skip
                exec_id = self._exec_create(argv, env={**self._env, **transient})
                # After the exec is created: creating the container may have changed the owner.
                owner = self._owner()
                if owner is not None:
                    os.fchown(dir_fd, *owner)
                stream = self._api().exec_start(exec_id, socket=True)
                timed_out, cancelled = self._collect(stream, output, timeout, cancel, dir_fd)
                exit_code = None if timed_out or cancelled else _exit_code(dir_fd)
                if exit_code is None and not (timed_out or cancelled):
                    exit_code = self._exit_code(exec_id)  # the launcher itself was killed (OOM)
            self._commit_state(Path("command"), dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
            shutil.rmtree(run_dir, ignore_errors=True)
            record.unlink(missing_ok=True)
            output.close()
        return CommandResult(
            output=output.text(),
            exit_code=exit_code,
            timed_out=timed_out,
            truncated=output.dropped > 0,
            interrupted=cancelled,
            output_file=output.spooled,
        )

    # -- the dispatcher ----------------------------------------------------------------------

    def _dispatcher(self) -> int | None:
        """The dispatcher's FIFO open for writing; started first if no one reads it. None when
        it cannot be started (then commands use exec)."""
        fifo = self._open_dispatcher()
        if fifo is not None:
            return fifo
        # One starter at a time (worker processes of this host share the state directory),
        # so two never each start one.
        with open(self.state_dir / _DISPATCH_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            fifo = self._open_dispatcher()
            if fifo is None:
                fifo = self._start_dispatcher()
        return fifo

    def _open_dispatcher(self) -> int | None:
        """The current dispatcher's FIFO opened for writing, or None when no one reads it
        (ENXIO: the dispatcher is gone) or it is not ours (the container can replace anything
        in the runs directory: nothing is followed, and only a FIFO is written to)."""
        name = (_read_regular(self.state_dir / _DISPATCH_POINTER) or b"").decode(errors="replace")
        if not _DISPATCH_FIFO.fullmatch(name):
            return None
        flags = os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(self.runs_dir / name, flags)
        except OSError:
            return None
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        return fd

    def _start_dispatcher(self) -> int | None:
        container_id = self.ensure_container()
        refused = self.state_dir / _DISPATCH_REFUSED
        if _read_regular(refused) == container_id.encode():
            return None  # this container cannot run it (no setsid): do not try every time
        pointer = self.state_dir / _DISPATCH_POINTER
        old = (_read_regular(pointer) or b"").decode(errors="replace")
        if _DISPATCH_FIFO.fullmatch(old):
            (self.runs_dir / old).unlink(missing_ok=True)
        name = f"dispatch-{uuid.uuid4().hex}"
        path = self.runs_dir / name
        os.mkfifo(path, 0o600)
        _write_atomic(pointer, name.encode())
        owner = self._owner()
        if owner is not None:
            os.lchown(path, *owner)
        api = self._api()
        argv = ["bash", "--noprofile", "--norc", "-c", _DISPATCH, "canvas-dispatch",
                f"{CONTAINER_RUNS}/{name}", _LAUNCH, _WRAPPER]  # fmt: skip
        try:
            exec_id = api.exec_create(
                container_id, argv, stdout=False, stderr=False, stdin=False, workdir="/"
            )["Id"]
            api.exec_start(exec_id, detach=True)
        except docker.errors.APIError:
            logger.warning("%s: cannot start the dispatcher", self.container_name, exc_info=True)
            path.unlink(missing_ok=True)
            return None
        deadline = time.monotonic() + _DISPATCH_START_SECONDS
        next_check = time.monotonic() + 0.1
        while time.monotonic() < deadline:
            fifo = self._open_dispatcher()
            if fifo is not None:
                return fifo
            if time.monotonic() >= next_check:
                next_check += 0.1
                info = api.exec_inspect(exec_id)
                if not info["Running"]:
                    if info["ExitCode"] == _DISPATCH_NO_SETSID:
                        _write_atomic(refused, container_id.encode())
                    break
            time.sleep(0.005)
        logger.warning("%s: the dispatcher did not start; using exec", self.container_name)
        path.unlink(missing_ok=True)  # a late start finds no FIFO (or one no one writes to)
        return None

    def _dispatch(
        self,
        fifo: int,
        message: bytes,
        dir_fd: int,
        output: _BoundedText,
        timeout: float,
        cancel: threading.Event | None,
    ) -> tuple[bool, bool]:
        """Hand the command to the dispatcher and read its output from the run directory's
        FIFO until the launcher has ended, time runs out or `cancel` is set; returns (timed
        out, cancelled). Raises _DispatchLost when the dispatcher died before starting it."""
        os.mkfifo("command.out", 0o600, dir_fd=dir_fd)
        owner = self._owner()
        if owner is not None:
            os.chown("command.out", *owner, dir_fd=dir_fd, follow_symlinks=False)
            os.fchown(dir_fd, *owner)
        # Opened before the message goes, so the launcher's open never waits for a reader.
        out = os.open("command.out", os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW, dir_fd=dir_fd)
        try:
            try:
                os.write(fifo, message)  # at most PIPE_BUF bytes: all of it or nothing
            except OSError as exc:  # a full pipe (a stuck dispatcher) or no reader left
                raise _DispatchLost from exc
            return self._collect_dispatched(fifo, out, output, timeout, cancel, dir_fd)
        finally:
            os.close(out)

    def _collect_dispatched(
        self,
        fifo: int,
        out: int,
        output: _BoundedText,
        timeout: float,
        cancel: threading.Event | None,
        dir_fd: int,
    ) -> tuple[bool, bool]:
        """As _collect, from the output FIFO: it ends when the launcher (and all it left) has
        closed it; or, when a job that escaped its group keeps it open, once the launcher has
        written its exit code. The run directory is polled, a few ms at first, backing off."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        sent = time.monotonic()
        deadline = sent + timeout
        interval = _POLL_FIRST_SECONDS
        started = nudged = False
        probe_at = sent + _DISPATCH_LOST_SECONDS
        timed_out = cancelled = False
        while True:
            now = time.monotonic()
            remaining = deadline - now
            if remaining <= 0 or (cancel is not None and cancel.is_set()):
                timed_out, cancelled = remaining <= 0, remaining > 0
                self._kill_group(dir_fd)
                _drain_fd(out, decoder, output, time.monotonic() + _DRAIN_SECONDS)
                break
            if select.select([out], [], [], min(remaining, interval))[0]:
                try:
                    chunk = os.read(out, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    break  # every writer has closed it: the launcher has ended
                output.add(decoder.decode(chunk))
                interval = _POLL_FIRST_SECONDS
                continue
            interval = min(interval * 2, _POLL_LAST_SECONDS)
            if _exists(dir_fd, "command.rc"):
                _drain_fd(out, decoder, output, time.monotonic() + 0.05)
                break
            started = started or _exists(dir_fd, "command.pgid")
            if started:
                continue
            if not nudged and now - sent > _DISPATCH_NUDGE_SECONDS:
                # Not started yet: a paused container holds its dispatcher frozen.
                nudged = True
                self.ensure_container()
            elif now >= probe_at:
                probe_at = now + _DISPATCH_LOST_SECONDS
                if _unread(fifo):
                    raise _DispatchLost
        output.add(decoder.decode(b"", final=True))
        return timed_out, cancelled

    def _exec_create(
        self, argv: list[str], *, env: Mapping[str, str], workdir: str = "", stdin: bool = False
    ) -> str:
        """Create the exec, bringing the container up first if it is not running."""
        api = self._api()
        for attempt in range(2):
            try:
                return api.exec_create(
                    self.container_name, argv, stdout=True, stderr=True, stdin=stdin,
                    tty=False, environment=dict(env), workdir=workdir or self._container_cwd(),
                )["Id"]  # fmt: skip
            except docker.errors.APIError as exc:
                # 404: no container (yet, or removed); 409: stopped or paused.
                if attempt or exc.status_code not in (404, 409):
                    raise
                self.ensure_container()
        raise AssertionError("unreachable")

    def _exit_code(self, exec_id: str) -> int | None:
        """The exec's exit code; the stream can end a moment before the engine notes it."""
        deadline = time.monotonic() + 5
        while True:
            info = self._api().exec_inspect(exec_id)
            if not info["Running"] or time.monotonic() > deadline:
                return info["ExitCode"]
            time.sleep(0.01)

    def _collect(
        self,
        stream: Any,
        output: _BoundedText,
        timeout: float,
        cancel: threading.Event | None,
        dir_fd: int,
    ) -> tuple[bool, bool]:
        """Read the exec's multiplexed output until it ends, time runs out or `cancel` is set;
        returns (timed out, cancelled). Either way the command's process group is killed.

        Like local._collect, reading stops shortly after the shell has saved its state even if
        a background job still holds the output open."""
        sock, pending = _raw_socket(stream)
        frames = _Frames(output)
        frames.feed(pending)
        deadline = time.monotonic() + timeout
        timed_out = cancelled = False
        try:
            while not frames.closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (cancel is not None and cancel.is_set()):
                    timed_out, cancelled = remaining <= 0, remaining > 0
                    self._kill_group(dir_fd)
                    _drain(sock, frames, time.monotonic() + _DRAIN_SECONDS)
                    break
                if select.select([sock], [], [], min(remaining, 0.2))[0]:
                    try:
                        chunk = sock.recv(65536)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        break
                    frames.feed(chunk)
                elif _exists(dir_fd, "command.done"):
                    # The shell is done; a job it left in the background keeps the stream
                    # open. Take what is already there and stop, as local does.
                    _drain(sock, frames, time.monotonic() + 0.05)
                    break
            frames.finish()
        finally:
            with contextlib.suppress(OSError):
                sock.close()
            with contextlib.suppress(Exception):
                stream.close()
        return timed_out, cancelled

    def _kill_group(self, dir_fd: int) -> None:
        """SIGTERM the running command's group (its shell saves state on the way out), SIGKILL
        after the grace; restart the container if no exec can even start."""
        leader = None
        deadline = time.monotonic() + _KILL_GRACE_SECONDS
        while leader is None and time.monotonic() < deadline:
            leader = _leader(dir_fd)  # the launcher writes it as its very first step
            if leader is None:
                time.sleep(0.02)
        if leader is None:
            logger.warning("%s: a command never started; restarting", self.container_name)
            self._restart()
            return
        steps = max(1, int(_KILL_GRACE_SECONDS / 0.05))
        self._signal_group(*leader, signal="TERM", steps=steps)

    def _signal_group(self, pgid: int, start: int, *, signal: str, steps: int) -> bool:
        """Run _KILL in the container; True when a group was signalled."""
        api = self._api()
        argv = ["bash", "--noprofile", "--norc", "-c", _KILL, "bash",
                str(pgid), str(start), signal, str(steps)]  # fmt: skip
        for _ in range(_KILL_ATTEMPTS):
            try:
                exec_id = api.exec_create(self.container_name, argv, stdin=True, workdir="/")["Id"]
                api.exec_start(exec_id)
                code = self._exit_code(exec_id)
            except docker.errors.APIError:
                code = None
            if code in (0, 2, 3):
                return code == 0
            time.sleep(0.1)  # no pid to start the exec with (a fork bomb): try again
        logger.warning("%s: cannot reach a command's processes; restarting", self.container_name)
        self._restart()
        return True

    def _restart(self) -> None:
        with contextlib.suppress(docker.errors.NotFound):
            self._api().restart(self.container_name, timeout=0)

    def stop_leftovers(self) -> int:
        """Kill, in the container, every command group a previous runner left running there;
        returns how many were still running. Call before running anything."""
        killed = 0
        for path in self.state_dir.glob(f"run-*{_RECORD_SUFFIX}"):
            run_dir = self.runs_dir / path.name.removesuffix(_RECORD_SUFFIX)
            try:
                dir_fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            except OSError:
                dir_fd = None
            try:
                leader = None if dir_fd is None else _leader(dir_fd)
                if leader is not None and self.container_status() in ("running", "paused"):
                    self.ensure_container()  # unpause: a paused container runs no exec
                    if self._signal_group(*leader, signal="KILL", steps=100):
                        killed += 1
                        logger.warning(
                            "stopped command group %s left in %s", leader[0], self.container_name
                        )
            finally:
                if dir_fd is not None:
                    os.close(dir_fd)
            shutil.rmtree(run_dir, ignore_errors=True)
            path.unlink(missing_ok=True)
        return killed


class _Frames:
    """Decodes Docker's multiplexed stream (an 8-byte header: stream, 0, 0, 0, size as 32-bit
    big-endian; then the payload) into one bounded text, stdout and stderr merged."""

    def __init__(self, output: _BoundedText) -> None:
        self.output = output
        self.closed = False
        self._buffer = bytearray()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> None:
        self._buffer += data
        while len(self._buffer) >= _FRAME_HEADER:
            size = int.from_bytes(self._buffer[4:_FRAME_HEADER], "big")
            if len(self._buffer) < _FRAME_HEADER + size:
                return
            payload = bytes(self._buffer[_FRAME_HEADER : _FRAME_HEADER + size])
            del self._buffer[: _FRAME_HEADER + size]
            self.output.add(self._decoder.decode(payload))

    def finish(self) -> None:
        self.output.add(self._decoder.decode(b"", final=True))


def _raw_socket(stream: Any) -> tuple[socket.socket, bytes]:
    """The exec's socket, non-blocking, and what the HTTP reader already buffered past the
    upgrade headers (a fast command's first output can arrive with them)."""
    sock = getattr(stream, "_sock", stream)
    sock.setblocking(False)
    pending = b""
    reader = getattr(getattr(getattr(stream, "_response", None), "raw", None), "_fp", None)
    buffered = getattr(reader, "fp", None)
    if buffered is not None and hasattr(buffered, "peek"):
        # peek returns the buffer without a read when it holds anything; else it tries one
        # read, which the non-blocking socket turns into "nothing".
        with contextlib.suppress(OSError, ValueError):
            pending = buffered.peek()
            if pending:
                buffered.read(len(pending))
    return sock, pending


def _drain(sock: socket.socket, frames: _Frames, until: float) -> None:
    while (remaining := until - time.monotonic()) > 0:
        if not select.select([sock], [], [], remaining)[0]:
            return
        try:
            chunk = sock.recv(65536)
        except BlockingIOError:
            continue
        if not chunk:
            return
        frames.feed(chunk)


def _write_new(dir_fd: int, name: str, data: bytes) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def _exit_code(dir_fd: int) -> int | None:
    data = _read_regular(Path("command.rc"), dir_fd=dir_fd)
    try:
        return int(data) if data else None
    except ValueError:
        return None


def _message(
    name: str, cwd: str, env: Mapping[str, str], transient: Mapping[str, str]
) -> bytes | None:
    """The dispatcher's message for one command (see _DISPATCH); None when it cannot carry it
    (a name the dispatcher would refuse, a NUL, or too long to be written in one piece)."""
    if any(not _ENV_NAME.fullmatch(k) or "\0" in v for k, v in env.items()) or "\0" in cwd:
        return None
    fields = [name, cwd, " ".join(transient), *(f"{k}={v}" for k, v in env.items()), ""]
    message = b"".join(field.encode() + b"\0" for field in fields)
    return message if len(message) <= select.PIPE_BUF else None


def _unread(fifo: int) -> bool:
    """True when no one reads the FIFO this write end belongs to any more (POLLERR): its
    dispatcher is gone, with whatever was left in it. (Another may have started since, on a
    FIFO of its own.)"""
    poller = select.poll()
    poller.register(fifo, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def _await_exit_code(dir_fd: int) -> int | None:
    """The code the launcher (or, if it was killed, the dispatcher) wrote; it can follow the
    output's end by a moment."""
    deadline = time.monotonic() + 5
    while (code := _exit_code(dir_fd)) is None and time.monotonic() < deadline:
        time.sleep(0.005)
    return code


def _leader(dir_fd: int) -> tuple[int, int] | None:
    """(pid, start time in clock ticks) the launcher recorded; None before it has."""
    data = _read_regular(Path("command.pgid"), dir_fd=dir_fd)
    if not data:
        return None
    try:
        fields = data.decode().rsplit(")", 1)[1].split()
        return int(data.split(b" ", 1)[0]), int(fields[19])
    except (ValueError, IndexError, UnicodeDecodeError):
        return None


def _resolve_user(api: docker.APIClient, container_id: str, user: str) -> tuple[int, int] | None:
    """Numeric uid and gid of `user` ("name", "uid", "name:group", ...) from the image's own
    /etc/passwd and /etc/group, read without running anything in it."""
    name, _, group = user.partition(":")
    files = {}
    for path in ("/etc/passwd", "/etc/group"):
        try:
            chunks, _ = api.get_archive(container_id, path)
            with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tar:
                member = tar.extractfile(tar.getmembers()[0])
                files[path] = member.read().decode(errors="replace") if member else ""
        except (docker.errors.APIError, tarfile.TarError, IndexError):
            files[path] = ""

    def lookup(text: str, key: str) -> list[str] | None:
        for line in text.splitlines():
            fields = line.split(":")
            if len(fields) >= 4 and (fields[0] == key or fields[2] == key):
                return fields
        return None

    entry = lookup(files["/etc/passwd"], name)
    uid = int(name) if name.isdigit() else int(entry[2]) if entry else None
    if uid is None:
        return None
    gid = int(entry[3]) if entry else uid
    if group:
        found = lookup(files["/etc/group"], group)
        gid = int(group) if group.isdigit() else int(found[2]) if found else gid
    return uid, gid


def _no_engine(exc: Exception) -> str:
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    return f"no Docker engine answers at {host} ({exc})"


_available: tuple[float, str | None] | None = None
_available_lock = threading.Lock()


def docker_available() -> str | None:
    """None when a Docker engine answers, else why not (for people); cached a few seconds."""
    global _available
    with _available_lock:
        if _available is not None and time.monotonic() - _available[0] < _AVAILABLE_TTL_SECONDS:
            return _available[1]
        try:
            client = docker.from_env(timeout=3)
            try:
                client.ping()
            finally:
                client.close()
            reason = None
        except docker.errors.DockerException as exc:
            reason = _no_engine(exc)
        _available = (time.monotonic(), reason)
        return reason


def sweep_orphans(is_live: Callable[[set[str]], set[str]]) -> int:
    """Remove our containers (label canvas.managed=1) whose conversation `is_live` does not
    return among the ids it is given (closed or deleted); returns how many were removed.
    Containers without our label are never looked at."""
    client = docker.from_env(timeout=_ENGINE_TIMEOUT_SECONDS)
    try:
        found = client.api.containers(all=True, filters={"label": f"{LABEL_MANAGED}=1"})
        by_conversation: dict[str, list[str]] = {}
        for container in found:
            labels = container.get("Labels") or {}
            if labels.get(LABEL_MANAGED) != "1":
                continue
            conversation = labels.get(LABEL_CONVERSATION, "")
            by_conversation.setdefault(conversation, []).append(container["Id"])
        live = is_live(set(by_conversation) - {""})
        removed = 0
        for conversation, ids in by_conversation.items():
            if conversation in live:
                continue
            for container_id in ids:
                try:
                    client.api.remove_container(container_id, force=True, v=True)
                except docker.errors.NotFound:
                    continue
                except docker.errors.APIError as exc:
                    if exc.status_code != 409:  # 409: another sweep is removing it already
                        raise
                    continue
                removed += 1
        return removed
    finally:
        client.close()
