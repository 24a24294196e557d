"""The conversation sidebar: the team's conversations with status dots, search and filters,
kept live by polling; and archiving (with confirmation in the page) and restoring."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET
from django_htmx.http import HttpResponseClientRedirect

from common.errors import ServiceError
from orchestration import archive, erase

from .access import Action
from .sidebar import SIDEBAR_TEMPLATE, sidebar_context
from .views import _conversation_or_404, conversation_post


@login_required
@require_GET
def conversation_sidebar(request: HttpRequest) -> HttpResponse:
    current = request.GET.get("current", "")
    context = sidebar_context(request, current_id=current)
    return render(request, SIDEBAR_TEMPLATE + "#sidebar-rows", context)


def _archiving(
    request: HttpRequest,
    conversation_id: uuid.UUID,
    service: Callable[..., None],
    *,
    gone: bool = False,
) -> HttpResponse:
    """Run an archive, restore or delete service; `gone`: the conversation no longer exists
    after it (a page showing it moves to the list)."""
    conversation = _conversation_or_404(request, conversation_id, Action.ACT)
    try:
        service(conversation_id=conversation.pk, by=request.user)
    except ServiceError as exc:
        if request.htmx:
            return HttpResponse(exc.detail, status=exc.status, content_type="text/plain")
        messages.warning(request, exc.detail)
        return redirect("conversation-detail", conversation_id=conversation.pk)
    on_its_page = (
        str(conversation.pk) in (request.htmx.current_url or "") if request.htmx else False
    )
    if request.htmx and not (gone and on_its_page):
        response = HttpResponse(status=204)  # the sidebar re-reads its rows; the page stays
        response["HX-Trigger"] = "sidebar-changed"
        return response
    if request.htmx:
        return HttpResponseClientRedirect(reverse("conversation-list"))
    return redirect("conversation-list")


conversation_archive = conversation_post(_archiving, archive.conversation_archive)
conversation_restore = conversation_post(_archiving, archive.conversation_restore)
conversation_delete = conversation_post(_archiving, erase.conversation_delete, gone=True)
