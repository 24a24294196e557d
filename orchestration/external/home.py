"""An external agent's private home: where it lives, when it is made and when it goes.

An agent run in the sandbox on this host gets HOME (and TMPDIR) of its own, writable, in
which it keeps what agents keep at home: its sessions (what ACP `session/load` reads back),
configuration, caches, shell snapshots, and with them the API key its profile gave it. So the
home:
- lives in its conversation's state folder, `CANVAS_STATE_ROOT/<conversation id>/agent.home`,
  never under a workspace (a sandbox binds its own conversation's workspace, which another
  conversation may share); only this conversation's agent sandbox binds it;
- is made (0700) by the conversation's first turn that runs the agent, which holds the run's
  lease, and kept across turns and worker restarts: the next turn's agent, on whichever
  worker of this host (or, with shared storage, any), finds its sessions there;
- goes when its conversation does: deleted (orchestration.erase, with the state folder) or
  archived (the sweep below, which also takes a home whose conversation is gone without
  that). An archived conversation's next turn, once restored, starts a new session and is
  told the transcript.

The sweeper need not walk every conversation's folder: a marker per home, in
`CANVAS_STATE_ROOT/agent-homes/`, is written before the home is made and removed after it,
so the sweep (`agent_homes_sweep`) reads only the homes there are. It removes a home only
under the conversation's row lock with no live run lease (a new runner's claim waits for the
lock), so a running turn's home is never taken away; an idle agent kept warm in a worker's
pool (orchestration.external.pool) may lose its home to an archive, and its pool closes it
within a reaper period.
A sweep sees the state root of the host it runs on (all of them with shared storage).

A stdio MCP server gets a private home the same way (it may keep a token there just as well):
`CANVAS_STATE_ROOT/<conversation id>/mcp.homes/<server name>`, made fresh (0700) when the
server starts and removed when it stops (orchestration.mcp.stdio), gone with the state folder
when the conversation is deleted, and swept after a crash through the marker
`agent-homes/<conversation id>.mcp`, which covers all of the conversation's servers. A server
outlives its slice's lease: the pool (orchestration.mcp.pool) keeps it up to
CANVAS_MCP_KEEP_SECONDS for the next slice, in whichever worker process ran the last one. So
its marker is touched when a server starts and whenever a slice leaves its servers in the
pool (before the slice's lease is released), and the sweep takes a conversation's MCP homes
only when it holds no live lease and its marker is older than `mcp_idle_seconds()`, longer
than the pool keeps anything. Two worker processes can hold the same server for one
conversation (one kept idle in a pool, one started by the next slice elsewhere): each removes
the home only while it is still the one it made, so the idle one's end never takes the
running one's. The MCP marker stays after its servers stop (another process may still hold
one); the sweep removes it with whatever homes are left once it has gone idle.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import shutil
import time
import uuid
from dataclasses import dataclass
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
MCP_HOMES = "mcp.homes"
MARKERS = "agent-homes"
MCP_MARKER_SUFFIX = ".mcp"
SWEEP_BATCH = 500
MCP_CLOSE_SECONDS = 30.0
"""How long closing a pool's servers may take (toolbox.CLOSE_SECONDS twice, and a margin)."""
_SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def agent_home(conversation_id: str) -> Path:
    """The conversation's agent home (whether or not it exists now)."""
    return workspace_dirs(str(conversation_id), None)[1] / HOME_NAME


def _marker(conversation_id: str) -> Path:
    return Path(settings.CANVAS_STATE_ROOT) / MARKERS / str(conversation_id)


def _outside_workspaces(home: Path, workspace: Path, what: str) -> None:
    """WorkspaceUnavailable when `home` would lie inside `workspace` or the workspaces root."""
    real = Path(os.path.realpath(home))
    for outside in (workspace, Path(settings.CANVAS_WORKSPACES_ROOT)):
        if real.is_relative_to(os.path.realpath(outside)):
            raise WorkspaceUnavailable(
                f"{what} would lie inside a workspace (CANVAS_STATE_ROOT is inside "
                "CANVAS_WORKSPACES_ROOT or the conversation's folder): a site administrator "
                "must move it."
            )


def _mark(marker: Path) -> None:
    """Write (or touch: its time is the last use) a home's marker."""
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()


def agent_home_prepare(conversation_id: str, *, workspace: Path) -> Path:
    """The conversation's agent home, private, made when missing and kept as it is when
    there (earlier turns' sessions). Call while holding the run's lease.
    WorkspaceUnavailable when the site's folders would put it inside a workspace."""
    home = agent_home(conversation_id)
    _outside_workspaces(home, workspace, "the agent's private home")
    _mark(_marker(conversation_id))
    home.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        home.mkdir(mode=0o700)
    if home.is_symlink() or not home.is_dir():
        raise WorkspaceUnavailable(f"the agent's private home {home} is not a folder")
    os.chmod(home, 0o700)
    return home


def agent_home_remove(conversation_id: str) -> bool:
    """Remove the conversation's agent home, then its marker; True when it is gone (or there
    was none). A home that cannot be removed keeps its marker, so the sweep tries again."""
    return _remove_marked(agent_home(conversation_id), _marker(conversation_id))


def _remove_marked(folder: Path, marker: Path) -> bool:
    """Remove `folder`, then (only once it is gone) `marker`; True when the folder is gone."""
    shutil.rmtree(folder, ignore_errors=True)
    if os.path.lexists(folder):
        logger.warning("could not remove %s; the sweep tries again", folder)
        return False
    marker.unlink(missing_ok=True)
    return True


def mcp_home(conversation_id: str, server: str) -> Path:
    """The private home of the conversation's stdio MCP server `server` (a configured name)."""
    if not _SERVER_NAME.fullmatch(server):
        raise ValueError(f"invalid MCP server name {server!r}")
    return _mcp_homes(conversation_id) / server


def _mcp_homes(conversation_id: str) -> Path:
    return workspace_dirs(str(conversation_id), None)[1] / MCP_HOMES


def _mcp_marker(conversation_id: str) -> Path:
    return _marker(f"{conversation_id}{MCP_MARKER_SUFFIX}")


@dataclass(slots=True)
class PrivateHome:
    """A home made by `mcp_home_prepare`: its path, and a descriptor of the folder made, held
    until `remove` so that its inode cannot be another folder's meanwhile (a folder removed
    and made again at once can get the same inode number)."""

    path: Path
    fd: int

    def remove(self) -> bool:
        """Remove the home if it is still the folder made for this server (another worker
        process may have made it afresh for a server of its own since); True when this one
        is gone. Call once."""
        if self.fd < 0:
            return True
        info = os.fstat(self.fd)
        made = (info.st_dev, info.st_ino)
        try:
            parent = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return True
        finally:
            os.close(self.fd)
            self.fd = -1
        try:
            if not _same(parent, self.path.name, made):
                return True
            # Out of the stable name first, so a home made meanwhile is never the one removed.
            gone = f".{self.path.name}.{uuid.uuid4().hex}.gone"
            os.rename(self.path.name, gone, src_dir_fd=parent, dst_dir_fd=parent)
            if not _same(parent, gone, made):  # made afresh in between: put it back
                with contextlib.suppress(OSError):
                    os.rename(gone, self.path.name, src_dir_fd=parent, dst_dir_fd=parent)
                return True
            shutil.rmtree(gone, dir_fd=parent, ignore_errors=True)
            return not os.path.lexists(self.path.parent / gone)
        except FileNotFoundError:
            return True
        finally:
            os.close(parent)


def _same(parent: int, name: str, made: tuple[int, int]) -> bool:
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return (info.st_dev, info.st_ino) == made


def mcp_home_prepare(conversation_id: str, server: str, *, workspace: Path) -> PrivateHome:
    """Make the server's private home afresh, empty and private (what was there before is
    removed: a dead worker's, or an idle server's in another worker's pool, which is closed
    soon). Call from a slice holding the run's lease. WorkspaceUnavailable as for
    agent_home_prepare."""
    home = mcp_home(conversation_id, server)
    _outside_workspaces(home, workspace, f"the MCP server {server}'s private home")
    _mark(_mcp_marker(conversation_id))
    home.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(3):  # another worker making the same home at the same moment: again
        shutil.rmtree(home, ignore_errors=True)
        with contextlib.suppress(FileExistsError):
            home.mkdir(mode=0o700)
            break
    else:
        raise FileExistsError(f"the MCP server {server}'s private home is being made elsewhere")
    return PrivateHome(home, os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW))


def mcp_homes_touch(conversation_id: str) -> None:
    """Note that the conversation's MCP servers are still in use (a pool keeps them)."""
    with contextlib.suppress(FileNotFoundError):
        os.utime(_mcp_marker(conversation_id))


def mcp_homes_remove(conversation_id: str) -> bool:
    """Remove the private homes of all the conversation's MCP servers, then their marker;
    True when they are gone. Call only when none of its servers can be running."""
    return _remove_marked(_mcp_homes(conversation_id), _mcp_marker(conversation_id))


def mcp_idle_seconds() -> float:
    """How long after its marker was last touched a conversation's MCP server may still be
    running without a lease: kept in a pool (whose reaper looks every quarter of the keep
    time), then closing."""
    keep = settings.CANVAS_MCP_KEEP_SECONDS
    return 2 * keep + settings.CANVAS_LEASE_SECONDS + MCP_CLOSE_SECONDS


def _leased(now) -> Q:
    return Q(lease_token__isnull=False, lease_expires_at__gte=now)


def _idle(marker: Path) -> bool:
    """Whether the MCP marker was last touched longer ago than any server may live unleased."""
    try:
        touched = marker.stat().st_mtime
    except FileNotFoundError:
        return False
    return time.time() - touched > mcp_idle_seconds()


def _markers() -> list[tuple[uuid.UUID, str]]:
    """(conversation, marker name) of the markers this module writes; at most SWEEP_BATCH,
    picked at random so markers still in use never hide the others."""
    try:
        names = os.listdir(Path(settings.CANVAS_STATE_ROOT) / MARKERS)
    except FileNotFoundError:
        return []
    found = []
    for name in random.sample(names, min(len(names), SWEEP_BATCH)):
        text = name.removesuffix(MCP_MARKER_SUFFIX)
        try:
            pk = uuid.UUID(text)
        except ValueError:
            continue
        if str(pk) == text:
            found.append((pk, name))
    return found


def agent_homes_sweep() -> int:
    """Remove the agent homes of archived or vanished conversations, and the MCP servers'
    homes a dead worker left (see the module docstring); how many conversations' homes were
    removed."""
    found = _markers()
    now = timezone.now()
    pks = {pk for pk, _ in found}
    live = set(Conversation.objects.filter(_leased(now), pk__in=pks).values_list("pk", flat=True))
    kept = set(
        Conversation.objects.filter(pk__in=pks, archived_at__isnull=True).values_list(
            "pk", flat=True
        )
    )
    removed = 0
    for pk, name in found:
        mcp = name.endswith(MCP_MARKER_SUFFIX)
        if pk in live or (mcp and not _idle(_marker(name))) or (not mcp and pk in kept):
            continue
        with transaction.atomic():
            # The row lock keeps a runner from claiming the run (and making the home afresh)
            # between this check and the removal.
            lease = (
                Conversation.objects.select_for_update()
                .filter(pk=pk)
                .values_list("lease_token", "lease_expires_at", "archived_at")
                .first()
            )
            if lease is not None and lease[0] is not None and lease[1] >= timezone.now():
                continue
            if not mcp and lease is not None and lease[2] is None:  # restored meanwhile
                continue
            if mcp:
                if _idle(_marker(name)):  # touched meanwhile: a slice kept its servers
                    removed += mcp_homes_remove(str(pk))
            else:
                removed += agent_home_remove(str(pk))
    if removed:
        logger.info("removed %d private home(s) no longer needed", removed)
    return removed
