"""Finding a team's conversations: by words in the title or the messages, by status, owner
and model, archived or not, top level or the children of one. Read-only; the caller has already narrowed to what the user may see
(selectors.conversations_visible_to)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db.models import Exists, OuterRef, Q, QuerySet

from .events import AgentMessageEvent, Status, UserMessageEvent, event_tag
from .models import Conversation, ConversationEvent

MESSAGE_TAGS = (event_tag(UserMessageEvent), event_tag(AgentMessageEvent))
MAX_TEXT_CHARS = 200


@dataclass(frozen=True, slots=True)
class ConversationFilter:
    text: str = ""
    """Words in the title or in any person's or agent's message (case-insensitive)."""
    status: str = ""
    owner_id: int | None = None
    model: str = ""
    archived: bool = False
    """True: only archived conversations; False: only the others."""
    parent_id: uuid.UUID | None = None
    """Only the sub-agents this conversation spawned (its direct children)."""
    top_level: bool = False
    """Only conversations a person or an automation started, no sub-agents. Off by default
    (the API lists every conversation, as it did before sub-agents); the sidebar turns it on."""

    @classmethod
    def from_query(cls, query, *, user_id: int | None) -> ConversationFilter:
        """From request parameters (q, status, owner=me|anyone, model, archived=1, parent=id,
        subagents=1); anything unknown is ignored rather than refused: a filter bar should
        never error. Top level only unless `subagents=1` or a `parent` is named."""
        status = query.get("status", "")
        try:
            parent_id = uuid.UUID(query.get("parent", ""))
        except ValueError:
            parent_id = None
        return cls(
            text=query.get("q", "").strip()[:MAX_TEXT_CHARS],
            status=status if status in Status._value2member_map_ else "",
            owner_id=user_id if query.get("owner") == "me" else None,
            model=query.get("model", "").strip()[:200],
            archived=query.get("archived") == "1",
            parent_id=parent_id,
            top_level=parent_id is None and query.get("subagents") != "1",
        )


def conversations_matching(rows: QuerySet[Conversation], f: ConversationFilter):
    rows = rows.filter(archived_at__isnull=not f.archived)
    if f.status:
        rows = rows.filter(status=f.status)
    if f.owner_id is not None:
        rows = rows.filter(owner_id=f.owner_id)
    if f.model:
        rows = rows.filter(model=f.model)
    if f.parent_id is not None:
        rows = rows.filter(parent_id=f.parent_id)
    if f.top_level:
        rows = rows.filter(parent__isnull=True)
    if f.text:
        said = ConversationEvent.objects.filter(
            conversation=OuterRef("pk"), type__in=MESSAGE_TAGS, payload__text__icontains=f.text
        )
        rows = rows.filter(Q(title__icontains=f.text) | Exists(said))
    return rows
