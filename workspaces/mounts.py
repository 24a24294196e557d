"""What a sandbox may see: the paths no sandbox ever mounts, and the one way a command is found.

The site chooses mounts; a team chooses nothing the host sees. A sandbox (workspaces.sandbox)
shows the system's tool directories, the site's CANVAS_SANDBOX_READONLY_PATHS, what a *site*
ACP profile names in `readonly` (a team's profile: only inside the folders the site lists in
CANVAS_ACP_TEAM_READONLY_PATHS, acp_bridge.profiles.team_readonly), and read-write the
workspace and a private home. A team's PATH, command or args add nothing to that.

`refusal(path)` says why a path may not be a mount, whatever its origin (site setting, site
profile, spec): `/` and the project's own folder (settings.BASE_DIR), /tmp and /var/tmp, or any
parent of them; /proc, /sys, /dev, /run, /var/run, /var/lib, /etc or anything inside them
(/proc/1/root is the host's root, /var/run/postgresql and /var/run/docker.sock are sockets a
read-only bind does not stop); judged on the path as written and on its real path. The
sandbox refuses such a mount with an error naming the path and why (MountRefused), never by
dropping it quietly; `site_path_refusals` lets the settings module stop at startup instead.

`command_in_view(command)` is the absolute path a command runs as: a bare name is looked up
in the sandbox's system PATH and in the site's read-only paths (each, and its bin/), never in
a PATH entry a team wrote; an absolute path must lie, as written and once resolved, in that
view. A directory, a file in the workspace or anything else the sandbox does not show is
refused with CommandRefused. The caller then runs that path, so a team's PATH (still set as
the process's environment) cannot pick a file an agent planted in the workspace. A script
whose `#!` interpreter the sandbox does not show (`#!/usr/bin/env node` with node installed
outside /usr, say) is refused too, naming where to show it: otherwise bwrap's only word would
be "execvp ...: No such file or directory" for a file that exists.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Top-level tool directories: on merged-/usr systems these are links into /usr."""
SITE_SETTING = "CANVAS_SANDBOX_READONLY_PATHS"

_NEVER_INSIDE = ("/proc", "/sys", "/dev", "/run", "/var/run", "/var/lib", "/etc")
"""Neither these nor anything under them: the host's processes, devices, sockets, config."""
_NEVER_WHOLE = ("/", "/tmp", "/var/tmp")
"""Not these themselves (nor a parent): every other tree, or every socket left in a tmp dir."""


class CommandRefused(ValueError):
    """The command is not a file the sandbox shows; the message names it and why."""


_PROJECT_DIR = str(Path(__file__).resolve().parent.parent)


@functools.cache
def _as_named_and_real(names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Each of `names` with itself and its real path: (name, shown); resolved once."""
    return tuple(
        (name, variant)
        for name in names
        for variant in dict.fromkeys([name, os.path.realpath(name)])
    )


def _project_dirs() -> tuple[str, ...]:
    from django.conf import settings

    base = str(settings.BASE_DIR) if settings.configured else _PROJECT_DIR
    return tuple(dict.fromkeys([_PROJECT_DIR, base]))


def under(path: str, root: str) -> bool:
    """`path` is `root` or inside it, by their text (normalise both first)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def _forbidden(path: str) -> str | None:
    for _, name in _as_named_and_real(_NEVER_INSIDE):
        if under(path, name):
            return f"it is inside {name}, which no sandbox sees"
        if under(name, path):
            return f"it holds {name}, which no sandbox sees"
    for whole, name in _as_named_and_real((*_NEVER_WHOLE, *_project_dirs())):
        if under(name, path):
            what = name if whole in _NEVER_WHOLE else "the project's own folder"
            return f"it is or holds {what}"
    return None


def refusal(path: str | os.PathLike[str], *, real: str | None = None) -> str | None:
    """Why `path` may not be mounted into a sandbox, or None. `real`: its real path when the
    caller already holds it open (judged instead of resolving the name again)."""
    text = os.fspath(path)
    if not os.path.isabs(text):
        return "it is not an absolute path"
    why = _forbidden(os.path.normpath(text))
    if why:
        return why
    try:
        real = real or os.path.realpath(text)
    except OSError as exc:  # a link we may not follow (/proc/1/root, say)
        return f"it cannot be resolved ({exc.strerror})"
    why = _forbidden(real)
    return f"{why} (it resolves to {real})" if why else None


def site_path_refusals(paths: Iterable[str]) -> list[str]:
    """`path: why` for each site read-only path no sandbox may mount (empty when all may)."""
    return [f"{path}: {why}" for path in paths if (why := refusal(path))]


def site_paths() -> tuple[str, ...]:
    """The site's CANVAS_SANDBOX_READONLY_PATHS."""
    from django.conf import settings

    return tuple(getattr(settings, SITE_SETTING, ()) or ())


def view_roots(readonly: Sequence[str | os.PathLike[str]] = ()) -> tuple[str, ...]:
    """The host paths a sandbox shows read-only (its system dirs, the site's paths and
    `readonly`), each normalised; any a sandbox would refuse left out."""
    roots = ["/usr", *SYSTEM_DIRS, *site_paths(), *map(os.fspath, readonly)]
    return tuple(
        os.path.normpath(root) for root in dict.fromkeys(roots) if root and not refusal(root)
    )


def _in_view(path: str, roots: Sequence[str]) -> bool:
    """`path` lies in the view both as written and resolved (the bind is at the written path;
    what is read is the resolved file)."""
    try:
        real = os.path.realpath(path)
    except OSError:
        return False
    return any(under(os.path.normpath(path), root) for root in roots) and any(
        under(real, os.path.realpath(root)) for root in roots
    )


def _runnable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


SHOW_IT = (
    f"show its installation read-only: the profile's `readonly` (for a team's profile, inside "
    f"the site's CANVAS_ACP_TEAM_READONLY_PATHS) or the site's {SITE_SETTING}"
)


def command_in_view(
    command: str, *, readonly: Sequence[str | os.PathLike[str]] = (), path: str | None = None
) -> str:
    """The absolute path `command` runs as in a sandbox that shows `readonly` besides the
    system dirs and the site's read-only paths; `path`: the PATH the command gets inside,
    where a `#!/usr/bin/env NAME` script finds NAME. Raises CommandRefused, naming the
    command and, when it exists but lies outside the view, how to show it."""
    roots = view_roots(readonly)
    if os.path.isabs(command):
        if os.path.isdir(command):
            raise CommandRefused(f"the command {command!r} is a directory, not a program")
        if not _in_view(command, roots):
            where = "it exists on this worker, but" if os.path.exists(command) else "it"
            raise CommandRefused(
                f"the command {command!r} is not in what the sandbox shows: {where} lies "
                f"outside /usr, /bin, /lib* and the read-only paths; {SHOW_IT}"
            )
        if not _runnable(command):
            raise CommandRefused(f"the command {command!r} is not an executable file")
        _interpreter_check(command, roots, path)
        return os.path.normpath(command)
    if not command or "/" in command or command in (".", ".."):
        raise CommandRefused(f"the command {command!r} is neither a program name nor a path")
    dirs = [*SYSTEM_PATH.split(os.pathsep)]
    for root in roots:
        dirs += [root, os.path.join(root, "bin")]
    for directory in dict.fromkeys(dirs):
        candidate = os.path.join(directory, command)
        if _runnable(candidate) and _in_view(candidate, roots):
            _interpreter_check(candidate, roots, path)
            return candidate
    raise CommandRefused(
        f"the command {command!r} is not found in the sandbox's system PATH or the site's "
        f"{SITE_SETTING} (a PATH in the configuration is not searched: name the program by "
        "its absolute path, or ask a site administrator to add its installation)"
    )


def _shebang(path: str) -> list[str]:
    """A script's `#!` line split into words (empty for a binary or an unreadable file)."""
    try:
        with open(path, "rb") as file:
            head = file.read(256)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    return head[2:].split(b"\n", 1)[0].decode(errors="replace").split()


def _interpreter_check(command: str, roots: Sequence[str], path: str | None) -> None:
    """CommandRefused when `command` is a script whose interpreter the sandbox cannot run:
    an absolute one outside the view, or `env NAME` with no NAME in the view on `path` (not
    judged when the caller does not know the PATH inside)."""
    words = _shebang(command)
    if not words:
        return
    interpreter, rest = words[0], words[1:]
    if os.path.basename(interpreter) != "env":
        if not (_runnable(interpreter) and _in_view(interpreter, roots)):
            raise CommandRefused(
                f"the command {command!r} is a script run by {interpreter} (its #! line), which "
                f"the sandbox does not show; {SHOW_IT}"
            )
        return
    name = next((word for word in rest if not word.startswith("-") and "=" not in word), None)
    if name is None or "/" in name or path is None:
        return
    for directory in path.split(os.pathsep):
        candidate = os.path.join(directory, name)
        if os.path.isabs(directory) and _runnable(candidate) and _in_view(candidate, roots):
            return
    host = shutil.which(name)
    found = f"; on this worker it is {host}" if host else ""
    raise CommandRefused(
        f"the command {command!r} is a script run by {name} (#!{' '.join(words)}), which is not "
        f"on its PATH in the sandbox ({path}){found}; {SHOW_IT}, and put its folder on the "
        "profile's PATH"
    )
