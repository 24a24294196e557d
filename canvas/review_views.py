"""The review page (every changed file's diff, full width) and its Send review button.

Reading needs VIEW; sending posts a user message, so it needs ACT, as the message form does.
A refused review comes back as the page with the reason beside the button and the pending
comments handed back to the browser, so nothing typed is lost.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from common.errors import ServiceError
from conversations.models import Conversation
from teams.permissions import role_allows, team_role

from .access import Action, conversation_for, http_errors
from .review import MODES, Mode, review_post, review_read
from .review_message import MAX_COMMENT_CHARS, MAX_NOTE_CHARS

TEMPLATE = "canvas/review.html"


def _context(request: HttpRequest, conversation: Conversation, mode: Mode) -> dict[str, Any]:
    role = team_role(request.user, conversation.team_id)
    return {
        "conversation": conversation,
        "conversation_id": str(conversation.pk),
        "review": review_read(conversation, mode),
        "mode": mode,
        "modes": MODES,
        "can_send": role_allows(role, Action.ACT),
        "role": role,
        "max_comment_chars": MAX_COMMENT_CHARS,
        "max_note_chars": MAX_NOTE_CHARS,
    }


@login_required
@require_GET
def conversation_review(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    with http_errors():
        conversation = conversation_for(request.user, conversation_id, Action.VIEW)
    mode = request.GET.get("mode", "split")
    mode = mode if mode in MODES else "split"
    return render(request, TEMPLATE, _context(request, conversation, mode))


@login_required
@require_POST
def conversation_review_send(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    with http_errors():
        conversation = conversation_for(request.user, conversation_id, Action.ACT)
    comments, note = request.POST.get("comments", ""), request.POST.get("note", "")
    try:
        review_post(conversation=conversation, sender=request.user, comments=comments, note=note)
    except ServiceError as exc:
        mode = request.POST.get("mode", "split")
        context = _context(request, conversation, mode if mode in MODES else "split")
        context |= {"error": exc.detail, "pending": comments, "note": note}
        return render(request, TEMPLATE, context, status=exc.status)
    messages.success(request, "Review sent to the agent.")
    return redirect("conversation-detail", conversation_id=conversation.pk)
