"""The conversation title in the page header: shown, edited inline (htmx), renamed.

GET answers the title (or, with `?edit=1`, its form); POST renames through
orchestration.services.conversation_rename, which checks the role and audits, and answers
the title, or the form with the reason it was refused.
"""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from common.errors import ServiceError
from orchestration import services
from teams.permissions import role_allows, team_role

from .access import Action, conversation_for, http_errors

TITLE = "canvas/conversation_detail.html#conversation-title"
TITLE_FORM = "canvas/conversation_detail.html#conversation-title-form"


@login_required
@require_http_methods(["GET", "POST"])
def conversation_title(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    with http_errors():
        conversation = conversation_for(
            request.user, conversation_id, Action.ACT if request.method == "POST" else Action.VIEW
        )
    can_act = role_allows(team_role(request.user, conversation.team_id), Action.ACT)
    context = {"conversation": conversation, "conversation_id": str(conversation.pk)}
    context |= {"can_act": can_act, "title_value": conversation.title}
    if request.method == "GET":
        editing = can_act and request.GET.get("edit") == "1"
        return render(request, TITLE_FORM if editing else TITLE, context)
    title = request.POST.get("title", "")
    try:
        conversation = services.conversation_rename(
            conversation_id=conversation.pk, title=title, by=request.user
        )
    except ServiceError as exc:
        context |= {"title_value": title, "title_error": exc.detail}
        return render(request, TITLE_FORM, context, status=exc.status)
    if not request.htmx:
        return redirect("conversation-detail", conversation_id=conversation.pk)
    return render(request, TITLE, context | {"conversation": conversation})
