"""Run control from the conversation page: pause, interrupt, resume and close, and Stop on a
node of the agent tree.

Each endpoint calls one orchestration.run_control service and answers with the header
`#controls` (Stop: that node's `#agent-stop`), a refusal (409 "not running") shown next to the
buttons with the service's status. Without htmx it redirects back to the conversation with a
message.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from common.errors import ServiceError
from orchestration import run_control

from .access import Action
from .views import (
    DETAIL_TEMPLATE,
    _back,
    _conversation_or_404,
    _header_context,
    conversation_post,
)


def _run_control(
    request: HttpRequest, conversation_id: uuid.UUID, service: Callable[..., None]
) -> HttpResponse:
    conversation = _conversation_or_404(request, conversation_id, Action.ACT)
    notice, status = None, 200
    try:
        service(conversation_id=conversation.pk, by=request.user)
    except ServiceError as exc:
        notice, status = exc.detail, exc.status
    conversation.refresh_from_db()
    if not request.htmx:
        return _back(request, conversation, notice)
    context = _header_context(conversation, status=conversation.status, can_act=True)
    context["notice"] = notice
    return render(request, DETAIL_TEMPLATE + "#controls", context, status=status)


conversation_pause = conversation_post(_run_control, run_control.conversation_pause)
conversation_interrupt = conversation_post(_run_control, run_control.conversation_interrupt)
conversation_resume = conversation_post(_run_control, run_control.conversation_run)
conversation_close = conversation_post(_run_control, run_control.conversation_close)


@login_required
@require_POST
def conversation_stop(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    """Stop a conversation and every active sub-agent under it. Answers with the node's Stop
    control ("Stopping…", or the refusal): the tree itself follows over the socket as the
    statuses change, on the page that posted (an ancestor's) as on the node's own."""
    conversation = _conversation_or_404(request, conversation_id, Action.ACT)
    notice, status = None, 200
    try:
        run_control.conversation_stop(conversation_id=conversation.pk, by=request.user)
    except ServiceError as exc:
        notice, status = exc.detail, exc.status
    if not request.htmx:
        return _back(request, conversation, notice)
    context = {
        "stop_id": str(conversation.pk),
        "stop_label": conversation.name or conversation.title or "this agent",
        "stopped": status == 200,
        "notice": notice,
    }
    return render(request, DETAIL_TEMPLATE + "#agent-stop", context, status=status)
