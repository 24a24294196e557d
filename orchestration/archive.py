"""Archiving a conversation: out of the team's sidebar and lists, its log and workspace kept
whole, back with a restore. A conversation that is running or waiting is not archived: pause
or finish it first, so nothing runs out of sight."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from common.errors import Conflict
from conversations.events import Status
from conversations.models import Conversation
from teams.audit import audit_record

ACTIVE = frozenset({Status.RUNNING, Status.WAITING_FOR_CONFIRMATION, Status.WAITING_FOR_SUBAGENTS})


def conversation_archive(*, conversation_id, by) -> None:
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        if conversation.status in ACTIVE:
            raise Conflict("this conversation is still running: pause or finish it first.")
        if conversation.archived_at is not None:
            return
        conversation.archived_at = timezone.now()
        conversation.save(update_fields=["archived_at", "updated_at"])
        audit_record(actor=by, kind="conversation.archived", team=conversation.team_id,
                     target=str(conversation.pk))  # fmt: skip


def conversation_restore(*, conversation_id, by) -> None:
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        if conversation.archived_at is None:
            return
        conversation.archived_at = None
        conversation.save(update_fields=["archived_at", "updated_at"])
        audit_record(actor=by, kind="conversation.restored", team=conversation.team_id,
                     target=str(conversation.pk))  # fmt: skip
