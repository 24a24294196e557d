"""Deleting a conversation for good: its row, its whole event log and its files.

The event log refuses every DELETE in the database itself; an Erasure row, inserted and
removed by this transaction, is the one exception (conversations migration 0009). Only the
conversation's owner or a team admin may delete, and never while it runs or waits: pause or
finish it first. The workspace folder goes too, unless it lies outside the team's area (an
operator's path) or another conversation still works in it; the worker state folder goes always,
and with it an external agent's private home a dead worker left there (orchestration.external.
home: its key may be in it), and the home's marker.
Its container (a docker workspace's) is removed first; if the engine does not answer, the orphan
sweep removes it later.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import transaction

from common.errors import Conflict, Forbidden
from conversations.models import Conversation, Erasure
from teams.audit import audit_record
from teams.permissions import Action, role_allows, team_role
from workspaces.paths import team_area

from .archive import ACTIVE
from .external.home import agent_home_remove
from .run_control import descendants_locked
from .workspace import workspace_of

logger = logging.getLogger(__name__)


def conversation_delete(*, conversation_id, by) -> None:
    """Delete the conversation and its sub-agents, deepest first (a child's row protects its
    parent's). Refused while any of them runs or waits: stop the subtree first."""
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        owner = by is not None and conversation.owner_id == getattr(by, "pk", None)
        if not owner and not role_allows(team_role(by, conversation.team_id), Action.ADMINISTER):
            raise Forbidden("only its owner or a team admin may delete a conversation.")
        if conversation.status in ACTIVE:
            raise Conflict("this conversation is still running: pause or finish it first.")
        subtree = descendants_locked(conversation.pk)
        if any(row.status in ACTIVE for row in subtree):
            raise Conflict("a sub-agent of this conversation is still running: stop it first.")
        for row in [*reversed(subtree), conversation]:
            _erase(row)
        audit_record(
            actor=by, kind="conversation.deleted", team=conversation.team_id,
            target=str(conversation_id),
            data={"title": conversation.title, "sub_agents": len(subtree)},
        )  # fmt: skip
    if conversation.parent_id is not None:  # its parent may have been waiting for it
        from .subagents.settle import parent_settle

        parent_settle(str(conversation.parent_id))


def _erase(conversation: Conversation) -> None:
    workspace = workspace_of(conversation)
    folders = _own_folders(conversation)
    pk = conversation.pk
    Erasure.objects.create(conversation_id=pk)
    conversation.delete()  # its events go with it (cascade), as the Erasure allows
    Erasure.objects.filter(conversation_id=pk).delete()
    transaction.on_commit(lambda: _remove(folders, workspace.close, str(pk)))


def _own_folders(conversation: Conversation) -> list[Path]:
    """Its state folder, and its workspace folder unless another conversation (a parent
    deleted after its children, a sharer) still works in it. Call before the row goes."""
    folders = [Path(settings.CANVAS_STATE_ROOT) / str(conversation.pk)]
    workspace = Path(conversation.workspace_path) if conversation.workspace_path else None
    if workspace is None:
        return folders
    area = team_area(Path(settings.CANVAS_WORKSPACES_ROOT), conversation.team_id)
    shared = (
        Conversation.objects.filter(workspace_path=conversation.workspace_path)
        .exclude(pk=conversation.pk)
        .exists()
    )
    if workspace.resolve().is_relative_to(area.resolve()) and not shared:
        folders.append(workspace)
    return folders


def _remove(folders: list[Path], close: Callable[[], None], conversation_id: str) -> None:
    try:
        close()
    except Exception:  # the engine's own errors: the orphan sweep catches what is left
        logger.warning("could not remove the container of a deleted conversation", exc_info=True)
    agent_home_remove(conversation_id)  # first: it holds keys; the sweep retries on a failure
    for folder in folders:
        try:
            shutil.rmtree(folder)
        except FileNotFoundError:
            pass
        except OSError:
            logger.warning("could not remove %s of a deleted conversation", folder, exc_info=True)
