"""What the conversation sidebar shows (templates/canvas/sidebar.html): the team's conversations
for the request's search and filters. Its views are canvas.sidebar_views; pages that include
the sidebar add this context."""

from __future__ import annotations

from typing import Any

from django.db.models import F
from django.http import HttpRequest

from conversations.events import Status
from conversations.search import ConversationFilter, conversations_matching
from conversations.tree import with_children_count

from .access import conversations_visible_to
from .event_rows import status_label
from .team_context import team_context

SIDEBAR_TEMPLATE = "canvas/sidebar.html"
SIDEBAR_LIMIT = 100


def sidebar_context(request: HttpRequest, *, current_id: str = "") -> dict[str, Any]:
    """What the sidebar shows for this request's filters (top-level conversations unless it
    asks for sub-agents), each with its count of sub-agents; `current_id` is highlighted."""
    ctx = team_context(request)
    team_id = ctx.current_team.pk if ctx.current_team else None
    visible = conversations_visible_to(request.user, team_id)
    chosen = ConversationFilter.from_query(request.GET, user_id=request.user.pk)
    return {
        # The source's title names a fork's origin in its row (one join, not a query a row).
        "sidebar_rows": with_children_count(conversations_matching(visible, chosen))
        .annotate(fork_source_title=F("forked_from__title"))
        .order_by("-updated_at")[:SIDEBAR_LIMIT],
        "sidebar_filter": chosen,
        "sidebar_models": sorted(set(visible.values_list("model", flat=True))),
        "sidebar_statuses": [(s.value, status_label(s.value)) for s in Status],
        "sidebar_current": current_id,
        "sidebar_can_act": ctx.current_team is None or ctx.can_act,
    }
