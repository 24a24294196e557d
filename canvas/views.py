"""Browser pages and their htmx fragments: parse, call one service, choose a template.

Access goes through canvas.access; anything a user may not see is a 404, and a role too weak
for a write is a 403. The list shows and creates conversations of the current team
(canvas.team_context). Service errors are shown in the form (or next to the button) with the
service's status.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect

from common.errors import ServiceError
from conversations import store
from conversations.models import Conversation
from conversations.tree import ancestors, with_children_count
from orchestration import services
from orchestration.chain.workers import host_awaited
from orchestration.control import approvals
from teams.permissions import role_allows, team_role

from .access import Action, conversation_for, conversations_visible_to, http_errors
from .agent_tree import agent_tree_context
from .event_rows import ApprovalCard, approval_card, event_row, last_status, status_label
from .forms import ConversationCreateForm, MessageForm
from .panels import panel_list
from .sidebar import sidebar_context
from .stream import stream_rows
from .team_context import team_context

LIST_TEMPLATE = "canvas/conversation_list.html"
DETAIL_TEMPLATE = "canvas/conversation_detail.html"
LIST_LIMIT = 200


def _conversation_or_404(request: HttpRequest, conversation_id: uuid.UUID, action: Action):
    with http_errors():
        return conversation_for(request.user, conversation_id, action)


Handler = Callable[..., HttpResponse]
"""`handler(request, conversation_id, service, **options)`: one POST edge's shape."""


def conversation_post(handler: Handler, service: Callable[..., None], **options: Any):
    """A signed-in POST view on one conversation that hands `service` to `handler`; the run
    control and archiving buttons are one each."""

    @login_required
    @require_POST
    def view(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
        return handler(request, conversation_id, service, **options)

    return view


def _can_act(request: HttpRequest, conversation: Conversation) -> bool:
    return role_allows(team_role(request.user, conversation.team_id), Action.ACT)


def _header_context(conversation: Conversation, *, status: str, can_act: bool) -> dict[str, Any]:
    return {
        "conversation": conversation,
        "conversation_id": str(conversation.pk),
        "status": status,
        "status_label": status_label(status),
        "can_act": can_act,
        "closed_at": conversation.closed_at,
        "external": bool(conversation.agent),
    }


def _pending_cards(conversation: Conversation) -> list[ApprovalCard]:
    return [approval_card(p) for p in approvals.pending_actions(conversation.pk)]


def _list_context(request: HttpRequest) -> dict[str, Any]:
    ctx = team_context(request)
    team_id = ctx.current_team.pk if ctx.current_team else None
    # Top level only: a sub-agent is reached from its parent's Agents section (or the
    # sidebar's Sub-agents filter), and each row says how many it spawned.
    rows = conversations_visible_to(request.user, team_id).filter(
        archived_at__isnull=True, parent__isnull=True
    )
    return {
        "conversations": with_children_count(rows)[:LIST_LIMIT],
        # With no team yet the first conversation creates a personal one, so it may start.
        "can_create": ctx.current_team is None or ctx.can_act,
    }


def _create_form(request: HttpRequest, data=None) -> ConversationCreateForm:
    team = team_context(request).current_team
    return ConversationCreateForm(data, team_id=team.pk if team else None)


@login_required
@require_GET
@vary_on_headers("HX-Request")  # the same URL answers a page or, when polled, just the rows
def conversation_list(request: HttpRequest) -> HttpResponse:
    template = LIST_TEMPLATE
    context = _list_context(request)
    if request.htmx:
        template += "#conversation-rows"
    else:
        context["form"] = _create_form(request)
        context |= sidebar_context(request)
    return render(request, template, context)


@login_required
@require_POST
def conversation_new(request: HttpRequest) -> HttpResponse:
    form = _create_form(request, request.POST)
    status = 400
    if form.is_valid():
        try:
            conversation = services.conversation_create(
                owner=request.user, team=team_context(request).current_team, **form.cleaned_data
            )
        except ServiceError as exc:
            form.add_error(None, exc.detail)
            status = exc.status
        else:
            url = reverse("conversation-detail", args=[conversation.pk])
            return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    template = LIST_TEMPLATE
    context: dict[str, Any] = {"form": form}
    if request.htmx:
        template += "#new-conversation"
    else:
        context |= _list_context(request)
    return render(request, template, context, status=status)


@login_required
@require_GET
def conversation_detail(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    conversation = _conversation_or_404(request, conversation_id, Action.VIEW)
    rows = stream_rows([event_row(e.seq, e.event) for e in store.load(conversation.pk)])
    conversation.refresh_from_db()  # stats at least as new as the events shown
    status = last_status(rows, conversation.status)
    context = _header_context(conversation, status=status, can_act=_can_act(request, conversation))
    context |= {"rows": rows, "message_form": MessageForm(), "cards": _pending_cards(conversation)}
    context["awaited_host"] = host_awaited(status=status, worker_host=conversation.worker_host)
    context["embedded"] = settings.EMBEDDED  # its worker is the server's own: none to start
    context["panels"] = panel_list()
    context["ancestors"] = ancestors(conversation.pk) if conversation.parent_id else []
    context |= agent_tree_context(conversation.pk)
    context |= sidebar_context(request, current_id=str(conversation.pk))
    return render(request, DETAIL_TEMPLATE, context)


@login_required
@require_POST
def conversation_message(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    conversation = _conversation_or_404(request, conversation_id, Action.ACT)
    form = MessageForm(request.POST)
    status = 400
    if form.is_valid():
        try:
            services.conversation_post_message(
                conversation_id=conversation.pk, text=form.cleaned_data["text"], sender=request.user
            )
        except ServiceError as exc:
            form.add_error("text", exc.detail)
            status = exc.status
        else:
            form, status = MessageForm(), 200
    if not request.htmx:
        if status != 200:
            messages.error(request, " ".join(form.errors.get("text", ["Invalid message."])))
        return redirect("conversation-detail", conversation_id=conversation.pk)
    context = _header_context(conversation, status=conversation.status, can_act=True)
    context["message_form"] = form
    return render(request, DETAIL_TEMPLATE + "#message-form", context, status=status)


def _back(request: HttpRequest, conversation: Conversation, notice: str | None) -> HttpResponse:
    if notice:
        messages.warning(request, notice)
    return redirect("conversation-detail", conversation_id=conversation.pk)
