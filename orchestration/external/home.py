"""An external agent's private home: where it lives, when it is made and when it goes.

An agent run in the sandbox on this host gets HOME (and TMPDIR) of its own, writable, in
which it keeps what agents keep at home: configuration, caches, shell snapshots, and with
them the API key its profile gave it. So the home:
- lives in its conversation's state folder, `CANVAS_STATE_ROOT/<conversation id>/agent.home`,
  never under a workspace (a sandbox binds its own conversation's workspace, which another
  conversation may share); only this conversation's agent sandbox binds it;
- is made fresh (0700) by the turn that runs the agent, which holds the run's lease, and is
  removed when the agent's process ends (acp_bridge.process) and again by the turn after it;
- goes with the state folder when its conversation is deleted (orchestration.erase);
- is removed by the sweeper (`agent_homes_sweep`) when a worker died before removing it: any
  home whose conversation is gone or holds no live run lease. A running turn holds the lease
  (renewed by its heartbeat) from before the home is made until after it is removed; a dead
  worker's lapses within CANVAS_LEASE_SECONDS. The check and the removal happen under the
  conversation's row lock, which a new runner's claim waits for, so a home in use is never
  taken away.

The sweeper need not walk every conversation's folder: a marker per home, in
`CANVAS_STATE_ROOT/agent-homes/`, is written before the home is made and removed after it,
so the sweep reads only the homes there are. The path is stable per conversation, so keeping
the home across turns for session resume (later) changes only when it is removed.
A sweep sees the state root of the host it runs on (all of them with shared storage).
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from conversations.models import Conversation
from workspaces.base import WorkspaceUnavailable
from workspaces.factory import workspace_dirs

logger = logging.getLogger(__name__)

HOME_NAME = "agent.home"
MARKERS = "agent-homes"
SWEEP_BATCH = 500


def agent_home(conversation_id: str) -> Path:
    """The conversation's agent home (whether or not it exists now)."""
    return workspace_dirs(str(conversation_id), None)[1] / HOME_NAME


def _marker(conversation_id: str) -> Path:
    return Path(settings.CANVAS_STATE_ROOT) / MARKERS / str(conversation_id)


def agent_home_prepare(conversation_id: str, *, workspace: Path) -> Path:
    """Make the conversation's agent home afresh, empty and private, and return it; what a
    dead runner left there is removed first. Call while holding the run's lease.
    WorkspaceUnavailable when the site's folders would put it inside a workspace."""
    home = agent_home(conversation_id)
    real = Path(os.path.realpath(home))
    for outside in (workspace, Path(settings.CANVAS_WORKSPACES_ROOT)):
        if real.is_relative_to(os.path.realpath(outside)):
            raise WorkspaceUnavailable(
                "the agent's private home would lie inside a workspace (CANVAS_STATE_ROOT is "
                "inside CANVAS_WORKSPACES_ROOT or the conversation's folder): a site "
                "administrator must move it."
            )
    marker = _marker(conversation_id)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    shutil.rmtree(home, ignore_errors=True)
    home.parent.mkdir(parents=True, exist_ok=True)
    home.mkdir(mode=0o700)
    return home


def agent_home_remove(conversation_id: str) -> bool:
    """Remove the conversation's agent home, then its marker; True when it is gone (or there
    was none). A home that cannot be removed keeps its marker, so the sweep tries again."""
    home = agent_home(conversation_id)
    shutil.rmtree(home, ignore_errors=True)
    if os.path.lexists(home):
        logger.warning("could not remove the agent home of conversation %s", conversation_id)
        return False
    _marker(conversation_id).unlink(missing_ok=True)
    return True


def _leased(now) -> Q:
    return Q(lease_token__isnull=False, lease_expires_at__gte=now)


def agent_homes_sweep() -> int:
    """Remove the homes a dead worker left (see the module docstring); how many."""
    try:
        names = os.listdir(Path(settings.CANVAS_STATE_ROOT) / MARKERS)
    except FileNotFoundError:
        return 0
    ids: dict[uuid.UUID, str] = {}
    for name in names[:SWEEP_BATCH]:
        try:
            pk = uuid.UUID(name)
        except ValueError:
            continue
        if str(pk) == name:  # only the markers this module writes
            ids[pk] = name
    now = timezone.now()
    live = set(Conversation.objects.filter(_leased(now), pk__in=ids).values_list("pk", flat=True))
    removed = 0
    for pk, name in ids.items():
        if pk in live:
            continue
        with transaction.atomic():
            # The row lock keeps a runner from claiming the run (and making the home afresh)
            # between this check and the removal.
            lease = (
                Conversation.objects.select_for_update()
                .filter(pk=pk)
                .values_list("lease_token", "lease_expires_at")
                .first()
            )
            if lease is not None and lease[0] is not None and lease[1] >= timezone.now():
                continue
            removed += agent_home_remove(name)
    if removed:
        logger.info("removed %d agent home(s) left by stopped workers", removed)
    return removed
