"""Read queries over conversations and their logs."""

from __future__ import annotations

from django.db.models import QuerySet

from .models import Conversation, ConversationEvent


def conversation_list_for_owner(*, user) -> QuerySet[Conversation]:
    return Conversation.objects.filter(owner=user).order_by("-created_at")


def latest_run_id(conversation_id) -> str | None:
    row = (
        ConversationEvent.objects.filter(conversation_id=conversation_id, type="run.started")
        .order_by("-seq")
        .values_list("payload", flat=True)
        .first()
    )
    return row.get("run_id") if row else None
