"""MCP connections kept open between the slices of a run, in this worker process.

A run is cut into slices of a few steps (CANVAS_SLICE_STEPS), and the next slice of a busy run
mostly runs in the same process (CANVAS_TASK_SECONDS). Starting every server again for each one
would cost its start-up every few steps and lose whatever state the server keeps (an open
browser, a login). So a slice that ends with its run still going leaves its toolbox here, and
the conversation's next slice takes it back if the servers would be launched exactly the same
way (the same configuration, secrets, workspace and network: `fingerprint`) and every session
is still up. Anything else closes it: another launch, a server that died or failed to start
(the next slice tries again), CANVAS_MCP_KEEP_SECONDS without a slice, more than MAX_KEPT runs
kept, the worker shutting down.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.conf import settings

from orchestration.external.home import mcp_homes_touch

from .launch import ServerLaunch
from .toolbox import ListedTool, McpToolbox

MAX_KEPT = 32


@dataclass
class Kept:
    toolbox: McpToolbox
    listed: list[ListedTool]
    fingerprint: str
    since: float = field(default_factory=time.monotonic)


_kept: OrderedDict[str, Kept] = OrderedDict()
_lock = threading.Lock()
_reaper: threading.Thread | None = None


def fingerprint(launches: Sequence[ServerLaunch]) -> str:
    """What decides how the servers start, secret values included (hashed, never kept)."""
    material = []
    for launch in launches:
        config, stdio = launch.config, launch.stdio
        material.append({
            "server": [config.name, config.transport, config.command, list(config.args),
                       config.url],
            "headers": dict(launch.headers),
            "stdio": stdio and [stdio.command, list(stdio.args), dict(stdio.env), str(stdio.cwd),
                                [str(p) for p in stdio.readonly], stdio.network],
        })  # fmt: skip
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def toolbox_take(conversation_id: str, launched_as: str) -> Kept | None:
    """The toolbox a previous slice of this conversation left, if it still serves."""
    with _lock:
        kept = _kept.pop(conversation_id, None)
    if kept is None:
        return None
    if kept.fingerprint == launched_as and kept.toolbox.connected(
        {tool.server for tool in kept.listed}
    ):
        return kept
    kept.toolbox.close()
    return None


def toolbox_keep(conversation_id: str, kept: Kept) -> None:
    """Leave the toolbox for the conversation's next slice (closed when it does not come).
    Call before the slice's lease is released: the servers' homes are marked in use for the
    sweep (orchestration.external.home) from here on."""
    mcp_homes_touch(conversation_id)
    kept.since = time.monotonic()
    with _lock:
        _kept[conversation_id] = kept
        _kept.move_to_end(conversation_id)
        surplus = [_kept.popitem(last=False)[1] for _ in range(len(_kept) - MAX_KEPT)]
    for old in surplus:
        old.toolbox.close()
    _reaper_start()


def close_expired(now: float | None = None) -> int:
    """Close what has waited longer than CANVAS_MCP_KEEP_SECONDS; returns how many."""
    now = time.monotonic() if now is None else now
    limit = settings.CANVAS_MCP_KEEP_SECONDS
    with _lock:
        expired = [pk for pk, kept in _kept.items() if now - kept.since >= limit]
        closing = [_kept.pop(pk) for pk in expired]
    for kept in closing:
        kept.toolbox.close()
    return len(closing)


def close_all() -> None:
    """At a worker's shutdown: every kept server stopped."""
    with _lock:
        closing = list(_kept.values())
        _kept.clear()
    for kept in closing:
        kept.toolbox.close()


def kept_count() -> int:
    with _lock:
        return len(_kept)


def _reaper_start() -> None:
    global _reaper
    with _lock:
        if _reaper is not None and _reaper.is_alive():
            return
        _reaper = threading.Thread(target=_reap, name="mcp-keep", daemon=True)
        _reaper.start()


def _reap() -> None:
    global _reaper
    while True:
        time.sleep(max(0.5, settings.CANVAS_MCP_KEEP_SECONDS / 4))
        close_expired()
        with _lock:
            if not _kept:
                _reaper = None
                return
