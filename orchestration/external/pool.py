"""External agents kept running between a conversation's turns, in this worker process.

An agent's start costs seconds (Claude's adapter and its CLI, Gemini's 11-12 s) and a new
session forgets what the agent knew. So a turn that ends well leaves its agent here, its
session open, and the conversation's next turn takes it back if the agent would be launched
exactly the same way (`fingerprint`: the profile's command, environment, secrets, workspace,
mounts and network), its session is the one the log names last, and no other process ran a
turn since (the log's last turn end is the one this agent wrote). Anything else closes it:
another launch, an agent that died or failed, the profile's `idle_timeout_seconds` without a
turn, more than MAX_KEPT agents kept, its conversation deleted or archived (the reaper looks),
the worker shutting down. Only agents in this host's sandbox are kept: a container's agent is
killed by the next turn's cleanup of the container (orchestration.external.place).

A kept agent's home stays where it is (orchestration.external.home), so when the agent is gone
the next turn, here or on another worker, loads its session from there.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from celery.signals import worker_process_shutdown, worker_shutdown
from django.db import DatabaseError, connection

from conversations.models import Conversation

from .agent_loop import AgentLoop
from .driver import TurnRequest

logger = logging.getLogger(__name__)

MAX_KEPT = 8
"""Agents kept per worker process (each is a sandbox and a runtime: Claude's takes ~300 MB)."""
REAP_SECONDS = (0.25, 10.0)
"""The reaper looks every quarter of the shortest idle limit kept, within these bounds (the
upper one is also how long a deleted or archived conversation's agent may outlive it)."""


@dataclass
class Kept:
    agent: AgentLoop
    fingerprint: str
    session_id: str
    last_turn: str
    """The id of the AcpTurnEvent that ended the agent's last turn."""
    idle_seconds: float
    since: float = field(default_factory=time.monotonic)


_kept: OrderedDict[str, Kept] = OrderedDict()
_lock = threading.Lock()
_reaper: threading.Thread | None = None


def fingerprint(request: TurnRequest, *, secrets_version: object) -> str:
    """What decides how the agent starts, secret values included (hashed, never kept)."""
    material = {
        "agent": request.agent, "command": request.command, "args": list(request.args),
        "env": dict(request.env), "workspace": str(request.workspace),
        "readonly": [str(p) for p in request.readonly], "network": request.network,
        "home": str(request.home), "mode": request.default_mode,
        "secrets": str(secrets_version),
    }  # fmt: skip
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def agent_take(
    conversation_id: str, launched_as: str, *, session_id: str | None, last_turn: str | None
) -> AgentLoop | None:
    """The agent the conversation's last turn left here, if it still serves this one."""
    with _lock:
        kept = _kept.pop(conversation_id, None)
    if kept is None:
        return None
    if (
        kept.fingerprint == launched_as
        and kept.session_id == session_id
        and kept.last_turn == last_turn
        and kept.agent.usable()
    ):
        return kept.agent
    kept.agent.close()
    return None


def agent_keep(conversation_id: str, kept: Kept) -> None:
    """Leave the agent for the conversation's next turn (closed when it does not come)."""
    kept.since = time.monotonic()
    with _lock:
        previous = _kept.pop(conversation_id, None)
        _kept[conversation_id] = kept
        surplus = [_kept.popitem(last=False)[1] for _ in range(len(_kept) - MAX_KEPT)]
    for old in ([previous] if previous is not None else []) + surplus:
        old.agent.close()
    _reaper_start()


def kept_agent(conversation_id: str) -> Kept | None:
    """What is kept for the conversation (left in place)."""
    with _lock:
        return _kept.get(conversation_id)


def kept_count() -> int:
    with _lock:
        return len(_kept)


def close_expired(now: float | None = None) -> int:
    """Close agents idle longer than their profile's idle limit; returns how many."""
    now = time.monotonic() if now is None else now
    with _lock:
        expired = [pk for pk, kept in _kept.items() if now - kept.since >= kept.idle_seconds]
        closing = [_kept.pop(pk) for pk in expired]
    for kept in closing:
        kept.agent.close()
    return len(closing)


def close_closed() -> int:
    """Close the agents of conversations deleted or archived since; returns how many."""
    with _lock:
        pks = list(_kept)
    if not pks:
        return 0
    try:
        open_ = {
            str(pk)
            for pk in Conversation.objects.filter(pk__in=pks, archived_at__isnull=True).values_list(
                "pk", flat=True
            )
        }
    except DatabaseError:  # the database is away: look again next time
        logger.warning("could not check the conversations of kept agents", exc_info=True)
        return 0
    return sum(agent_close(pk) for pk in pks if pk not in open_)


def agent_close(conversation_id: str) -> bool:
    """Close the conversation's kept agent; True when there was one."""
    with _lock:
        kept = _kept.pop(conversation_id, None)
    if kept is not None:
        kept.agent.close()
    return kept is not None


def close_all() -> None:
    """At a worker's shutdown: every kept agent stopped."""
    with _lock:
        closing = list(_kept.values())
        _kept.clear()
    for kept in closing:
        kept.agent.close()


@worker_shutdown.connect
@worker_process_shutdown.connect
def _close_at_shutdown(**_: object) -> None:
    close_all()


def _period() -> float:
    with _lock:
        shortest = min((kept.idle_seconds for kept in _kept.values()), default=REAP_SECONDS[1])
    return min(max(shortest / 4, REAP_SECONDS[0]), REAP_SECONDS[1])


def _reaper_start() -> None:
    global _reaper
    with _lock:
        if _reaper is not None and _reaper.is_alive():
            return
        _reaper = threading.Thread(target=_reap, name="acp-keep", daemon=True)
        _reaper.start()


def _reap() -> None:
    global _reaper
    while True:
        time.sleep(_period())
        close_expired()
        try:
            close_closed()
        finally:
            connection.close()  # this thread's own: not held between looks
        with _lock:
            if not _kept:
                _reaper = None
                return
