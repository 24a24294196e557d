"""Object lookups that go through the one permission helper (teams.permissions).

Every page, htmx endpoint, API route and websocket fetches conversations here. An object in a
team the user is not in answers exactly like one that does not exist (NotFound → 404); a team
member whose role is too weak gets Forbidden (403). Views turn both into Django's answers with
`http_errors()`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.core.exceptions import PermissionDenied
from django.http import Http404

from common.errors import Forbidden, NotFound
from conversations.models import Conversation
from conversations.selectors import conversations_visible_to
from teams.permissions import Action, ateam_role, role_allows, team_role

__all__ = [
    "Action",
    "aconversation_for",
    "conversation_for",
    "conversations_visible_to",
    "http_errors",
]


@contextmanager
def http_errors() -> Iterator[None]:
    """Inside a view: a service's NotFound answers 404 and its Forbidden 403, with the
    service's detail; any other error passes through."""
    try:
        yield
    except NotFound as exc:
        raise Http404(exc.detail) from None
    except Forbidden as exc:
        raise PermissionDenied(exc.detail) from None


def _pk(conversation_id: uuid.UUID | str) -> uuid.UUID:
    try:
        return uuid.UUID(str(conversation_id))
    except ValueError:
        raise NotFound("no such conversation.") from None


def _decide(conversation: Conversation | None, role: str | None, action: Action) -> Conversation:
    if conversation is None or role is None:
        raise NotFound("no such conversation.")
    if not role_allows(role, action):
        raise Forbidden(f"your role in this team ({role}) does not allow this.")
    return conversation


def conversation_for(user, conversation_id: uuid.UUID | str, action: Action) -> Conversation:
    """The conversation if `user` may perform `action` on it."""
    conversation = Conversation.objects.filter(pk=_pk(conversation_id)).first()
    role = team_role(user, conversation.team_id) if conversation else None
    return _decide(conversation, role, action)


async def aconversation_for(user, conversation_id: uuid.UUID | str, action: Action) -> Conversation:
    conversation = await Conversation.objects.filter(pk=_pk(conversation_id)).afirst()
    role = await ateam_role(user, conversation.team_id) if conversation else None
    return _decide(conversation, role, action)
