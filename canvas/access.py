"""The one place that decides who may see or act on a conversation.

Every page, htmx endpoint, API route and websocket asks here. Anything a user may not see
answers exactly like something that does not exist (404), so ids leak nothing.
"""

from __future__ import annotations

import uuid
from enum import StrEnum

from django.db.models import QuerySet

from conversations.errors import NotFound
from conversations.models import Conversation


class Action(StrEnum):
    VIEW = "view"
    ACT = "act"


def conversations_visible_to(user) -> QuerySet[Conversation]:
    if not getattr(user, "is_authenticated", False):
        return Conversation.objects.none()
    if user.is_superuser:
        return Conversation.objects.all()
    return Conversation.objects.filter(owner=user)


def conversation_for(user, conversation_id: uuid.UUID | str, action: Action) -> Conversation:
    """The conversation if `user` may perform `action` on it; NotFound otherwise."""
    try:
        pk = uuid.UUID(str(conversation_id))
    except ValueError:
        raise NotFound("no such conversation.") from None
    conversation = conversations_visible_to(user).filter(pk=pk).first()
    if conversation is None:
        raise NotFound("no such conversation.")
    return conversation


async def aconversation_for(user, conversation_id: uuid.UUID | str, action: Action) -> Conversation:
    try:
        pk = uuid.UUID(str(conversation_id))
    except ValueError:
        raise NotFound("no such conversation.") from None
    conversation = await conversations_visible_to(user).filter(pk=pk).afirst()
    if conversation is None:
        raise NotFound("no such conversation.")
    return conversation
