"""The worker host's name: the identity of the disk that holds its local workspaces.

Conversations with a local workspace are pinned to the host that holds it, so the name must
outlive the process and the container: a deploy that gives every container a fresh hostname
must not strand every pinned run. `CANVAS_WORKER_HOST` wins when set; otherwise the name is
read from `<state root>/worker-host`, written once (the machine's hostname plus a random
suffix, so two machines both called `worker` never share a queue). The file lives on the same
disk as the conversations' state, so whoever mounts that disk is that host; two workers
sharing the disk share the name, which is right. Pure: imported by settings.
"""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path

FILE_NAME = "worker-host"


def stable_worker_host(state_root: Path, configured: str | None = None) -> str:
    """`configured` if given, else the name persisted in `state_root`, created on first use.

    Falls back to the hostname (not persisted) when the state root cannot be written, e.g. a
    read-only web container: only workers need a stable name.
    """
    if configured:
        return configured
    path = Path(state_root) / FILE_NAME
    try:
        return _read(path) or _create(path)
    except OSError:
        return socket.gethostname()


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""


def _create(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    name = f"{socket.gethostname()}-{secrets.token_hex(3)}"
    try:
        # O_EXCL: two processes starting together agree on whichever name landed first.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return _read(path) or name
    with os.fdopen(fd, "w") as handle:
        handle.write(name + "\n")
    return name
