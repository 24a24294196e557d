"""What a command tries in order to get out of its sandbox, and what must never come back."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from workspaces import sandbox

REPO = Path(__file__).resolve().parent.parent
SETTINGS_FILE = REPO / "canvas" / "settings.py"
CANARY_NAME = "CANVAS_CANARY"


def escape_script(*, outside: Path) -> str:
    """Shell that tries every way out and prints what it got; `outside` is a host directory
    the command must not be able to write into (or read). The success markers are quoted
    apart, so the script itself (in /proc/1/cmdline for a hook) never shows one."""
    return f"""
echo "== ppid environ"; tr '\\0' '\\n' < /proc/$PPID/environ
echo "== pid 1 environ"; tr '\\0' '\\n' < /proc/1/environ
echo "== pid 1 cmdline"; tr '\\0' ' ' < /proc/1/cmdline; echo
echo "== every environ"; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < "$f"; done
echo "== ps"; ps -e -o pid=,comm=
echo "== settings"; cat {SETTINGS_FILE}
echo "== worker cwd"; ls {os.getcwd()}
echo "== postgres"; (exec 3<>/dev/tcp/127.0.0.1/5432) && echo POSTGRES-"REACHED"
echo "== redis"; (exec 3<>/dev/tcp/127.0.0.1/6379) && echo REDIS-"REACHED"
echo "== python socket"; python3 -c 'import socket; socket.create_connection(("127.0.0.1", 5432), 2); print("PY-POSTGRES-" + "REACHED")'
echo "== writes"; echo x > {outside}/escaped; echo x > {REPO}/escaped-{uuid.uuid4().hex}
echo x > /tmp/escaped-host-tmp; echo x > /usr/escaped
echo "== do""ne"
"""


def worker_values() -> dict[str, str]:
    """The worker's own secrets and the canary: none may appear in a command's output."""
    from django.conf import settings

    values = {"SECRET_KEY": settings.SECRET_KEY, CANARY_NAME: os.environ[CANARY_NAME]}
    for name in ("DATABASE_URL", "REDIS_URL", "CANVAS_SECRET_KEYS"):
        if os.environ.get(name):
            values[name] = os.environ[name]
    return values


def assert_contained(output: str, *, outside: Path) -> None:
    """Every attempt of `escape_script` failed, and nothing of the worker's showed."""
    for name, value in worker_values().items():
        assert value not in output, f"the worker's {name} leaked"
    assert CANARY_NAME not in output
    for reached in ("POSTGRES-REACHED", "REDIS-REACHED", "PY-POSTGRES-REACHED"):
        assert reached not in output
    assert "DJANGO" not in output and "INSTALLED_APPS" not in output  # settings.py unread
    processes = output.split("== ps\n", 1)[1].split("== settings", 1)[0].split()
    names = set(processes[1::2])
    assert names <= {"bwrap", "bash", "ps"}, names  # only the sandbox's own processes
    assert "== done" in output
    assert not (outside / "escaped").exists()
    assert not list(REPO.glob("escaped-*"))
    assert not Path("/tmp/escaped-host-tmp").exists()
    assert not Path("/usr/escaped").exists()


@contextmanager
def sandbox_broken(settings, *, allow_unsandboxed: bool) -> Iterator[None]:
    """As on a host where bwrap does not work: CANVAS_BWRAP names a binary that fails."""
    settings.CANVAS_BWRAP = "/bin/false"
    settings.CANVAS_UNSANDBOXED_COMMANDS = allow_unsandboxed
    sandbox.sandbox_status.cache_clear()
    try:
        yield
    finally:
        sandbox.sandbox_status.cache_clear()
