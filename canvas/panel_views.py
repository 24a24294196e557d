"""The side panel's htmx endpoints: one tab (canvas.panels) and one changed file's diff."""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from common.errors import ServiceError
from teams.permissions import role_allows, team_role

from . import workspace_reads
from .access import Action, conversation_for, http_errors
from .panels import TEMPLATE, diff_lines, panel_get


@login_required
@require_GET
def conversation_panel(request: HttpRequest, conversation_id: uuid.UUID, name: str) -> HttpResponse:
    with http_errors():
        conversation = conversation_for(request.user, conversation_id, Action.VIEW)
    panel = panel_get(name)
    if panel is None:
        raise Http404("no such panel.")
    context = panel.context(conversation, request)
    context |= {"conversation_id": str(conversation.pk), "panel": panel}
    context["can_act"] = role_allows(team_role(request.user, conversation.team_id), Action.ACT)
    return render(request, panel.template, context)


@login_required
@require_GET
def conversation_diff(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    with http_errors():
        conversation = conversation_for(request.user, conversation_id, Action.VIEW)
    path = request.GET.get("path", "")
    try:
        found = workspace_reads.diff(conversation, path)
        context = {"diff": found, "lines": diff_lines(found.text)}
    except ServiceError as exc:
        context = {"refusal": exc.detail}
    return render(request, f"{TEMPLATE}#file-diff", context)
