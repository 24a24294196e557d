"""Run control from the conversation page: pause, interrupt and resume.

Each endpoint calls one orchestration.run_control service and answers with the header
`#controls`, a refusal (409 "not running") shown next to the buttons with the service's
status. Without htmx it redirects back to the conversation with a message.
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
from .views import DETAIL_TEMPLATE, _back, _conversation_or_404, _header_context


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


@login_required
@require_POST
def conversation_pause(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    return _run_control(request, conversation_id, run_control.conversation_pause)


@login_required
@require_POST
def conversation_interrupt(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    return _run_control(request, conversation_id, run_control.conversation_interrupt)


@login_required
@require_POST
def conversation_resume(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    return _run_control(request, conversation_id, run_control.conversation_run)
