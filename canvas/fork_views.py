"""Fork from the conversation page: the header's Fork (at the last quiet point) and each
event's "Fork here" (at its seq). On success the browser goes to the new conversation
(HX-Redirect, or a plain redirect without htmx); a refusal (a cut inside a tool call, a
sub-agent, a workspace too large) comes back with its status next to the button pressed: the
header's buttons, or the event's own "Fork here" (`#fork-notice`, into the notice beside it).
"""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from common.errors import ServiceError
from orchestration.fork import conversation_fork

from .access import Action
from .views import DETAIL_TEMPLATE, _back, _conversation_or_404, _header_context


def _at_seq(request: HttpRequest) -> int | None:
    raw = request.POST.get("at_seq", "").strip()
    if not raw:
        return None
    try:
        return max(0, int(raw))
    except ValueError:
        return 0  # the service names the range


@login_required
@require_POST
def conversation_fork_view(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    source = _conversation_or_404(request, conversation_id, Action.ACT)
    at_seq = _at_seq(request)
    try:
        fork = conversation_fork(source=source, by=request.user, at_seq=at_seq)
    except ServiceError as exc:
        if not request.htmx:
            return _back(request, source, str(exc.detail))
        if at_seq is not None:  # an event's "Fork here"
            context = {"notice": exc.detail}
            return render(request, DETAIL_TEMPLATE + "#fork-notice", context, status=exc.status)
        context = _header_context(source, status=source.status, can_act=True)
        context["notice"] = exc.detail
        return render(request, DETAIL_TEMPLATE + "#controls", context, status=exc.status)
    url = reverse("conversation-detail", kwargs={"conversation_id": fork.pk})
    if request.htmx:
        return HttpResponse(headers={"HX-Redirect": url})
    return redirect(url)
