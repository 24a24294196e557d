"""The stream's on-demand pieces: a long tool output in full ("show all" on a clipped card)."""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from conversations import store
from conversations.events import ObservationEvent

from .access import Action, conversation_for, http_errors
from .workspace_reads import OUTPUT_PAGE_BYTES, output_text

DETAIL_TEMPLATE = "canvas/conversation_detail.html"


@login_required
@require_GET
def event_output(request: HttpRequest, conversation_id: uuid.UUID, seq: int) -> HttpResponse:
    """A tool result's whole output, replacing its clipped head and tail."""
    with http_errors():
        conversation = conversation_for(request.user, conversation_id, Action.VIEW)
    found = store.load(conversation.pk, after_seq=seq - 1, limit=1) if seq > 0 else []
    if not found or found[0].seq != seq or not isinstance(found[0].event, ObservationEvent):
        raise Http404("No tool result with this number.")
    context = {"seq": seq, "content": found[0].event.content}
    return render(request, DETAIL_TEMPLATE + "#tool-output-full", context)


@login_required
@require_GET
def event_output_file(request: HttpRequest, conversation_id: uuid.UUID, seq: int) -> HttpResponse:
    """A cut tool output's whole text, from the workspace's output area, as plain text."""
    with http_errors():
        conversation = conversation_for(request.user, conversation_id, Action.VIEW)
    found = store.load(conversation.pk, after_seq=seq - 1, limit=1) if seq > 0 else []
    event = found[0].event if found and found[0].seq == seq else None
    if not isinstance(event, ObservationEvent) or not event.output_file:
        raise Http404("No cut tool output with this number.")
    with http_errors():
        text, longer = output_text(conversation, event.output_file)
    if longer:
        text += f"\n[... the page shows the first {OUTPUT_PAGE_BYTES // (1024 * 1024)} MiB ...]\n"
    response = HttpResponse(text, content_type="text/plain; charset=utf-8")
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Disposition"] = "inline"
    return response
