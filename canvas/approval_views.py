"""Approval cards: each endpoint parses, calls one service, renders a fragment.

Decisions answer with the card they came from (`#approval-card` or `#approval-decided`), so a
refusal (409 "already decided", 404, 400) is shown inline on that card; approve-all answers
with the whole `#approvals` section (pause, interrupt and resume: canvas.run_control_views).
Without htmx every endpoint redirects back to the conversation with a message.
The "Needs approval" page lists the current team's waiting conversations and is polled; a
sub-agent's row shows the conversations that spawned it. Its rows (and the team's Runs) decide
through the same endpoints, posting `answer=line` to get one line back instead of a card.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import trigger_client_event

from common.errors import ServiceError
from conversations.events import Decision
from conversations.models import Conversation
from conversations.tree import ancestor_paths
from orchestration.control import approvals
from teams.permissions import role_allows, team_roles

from .access import Action
from .event_rows import ApprovalCard, approval_card
from .team_context import team_context
from .views import DETAIL_TEMPLATE, _back, _conversation_or_404, _pending_cards

APPROVALS_TEMPLATE = "canvas/approvals.html"
WAITING_LIMIT = 50
MAX_REASON_CHARS = 2000
MAX_OPTION_ID_CHARS = 500


@dataclass(frozen=True, slots=True)
class DecidedCard:
    """What a decided card shows; the same fields as an ActionDecisionEvent."""

    action_id: str
    decision: Decision
    by: str
    reason: str = ""
    option_id: str | None = None
    """The external agent's option it answered with, when the card offered options."""


@dataclass(frozen=True, slots=True)
class WaitingConversation:
    conversation: Conversation
    cards: list[ApprovalCard]
    parents: list[tuple[uuid.UUID, str]]
    """A sub-agent's path of parents, (id, title) from the top-level one; [] at top level."""
    can_act: bool = False
    """The user's role in its team lets them decide (the endpoints check again)."""


class RejectForm(forms.Form):
    reason = forms.CharField(required=False, max_length=MAX_REASON_CHARS, strip=True)


class ApproveForm(forms.Form):
    option_id = forms.CharField(required=False, max_length=MAX_OPTION_ID_CHARS, strip=False)
    """An external agent's option (its button); blank: approve as for our own tools."""


def _from_list(request: HttpRequest) -> bool:
    """Posted from a list (the inbox, the team's Runs): answer with one line, not a card."""
    return request.POST.get("answer") == "line"


def _decided(
    request: HttpRequest,
    conversation: Conversation,
    action_id: str,
    decision: Decision,
    reason: str,
    option_id: str | None = None,
) -> HttpResponse:
    if not request.htmx:
        return _back(request, conversation, None)
    by = request.user.get_username()
    context = {
        "conversation_id": str(conversation.pk),
        "decision": DecidedCard(action_id, decision, by, reason, option_id),
    }
    template = (
        APPROVALS_TEMPLATE + "#decision-line"
        if _from_list(request)
        else DETAIL_TEMPLATE + "#approval-decided"
    )
    # The nav badge counts waiting conversations: it asks again now, not at its next poll.
    return trigger_client_event(render(request, template, context), "approvals-changed")


def _refused(
    request: HttpRequest, conversation: Conversation, action_id: str, error: ServiceError
) -> HttpResponse:
    """The card again, with the service's refusal on it; a bare notice if it is not pending."""
    if not request.htmx:
        return _back(request, conversation, error.detail)
    if _from_list(request):
        context = {"notice": error.detail}
        return render(request, APPROVALS_TEMPLATE + "#decision-line", context, status=error.status)
    card = next((c for c in _pending_cards(conversation) if c.action_id == action_id), None)
    context = {
        "conversation_id": str(conversation.pk),
        "can_act": True,
        "card": card,
        "action_id": action_id,
        "notice": error.detail,
        "notice_status": error.status,
    }
    return render(request, DETAIL_TEMPLATE + "#approval-card", context, status=error.status)


@login_required
@require_POST
def action_approve(
    request: HttpRequest, conversation_id: uuid.UUID, action_id: str
) -> HttpResponse:
    conversation = _conversation_or_404(request, conversation_id, Action.ACT)
    form = ApproveForm(request.POST)
    if not form.is_valid():
        error = ServiceError(f"the option id must be at most {MAX_OPTION_ID_CHARS} characters.")
        return _refused(request, conversation, action_id, error)
    option_id = form.cleaned_data["option_id"] or None
    try:
        # An option of a reject kind records a rejection: the card says what was recorded.
        decision = approvals.action_approve(
            conversation_id=conversation.pk, action_id=action_id, by=request.user,
            option_id=option_id,
        )  # fmt: skip
    except ServiceError as exc:
        return _refused(request, conversation, action_id, exc)
    return _decided(request, conversation, action_id, decision, "", option_id)


@login_required
@require_POST
def action_reject(request: HttpRequest, conversation_id: uuid.UUID, action_id: str) -> HttpResponse:
    conversation = _conversation_or_404(request, conversation_id, Action.ACT)
    form = RejectForm(request.POST)
    if not form.is_valid():
        error = ServiceError(f"the reason must be at most {MAX_REASON_CHARS} characters.")
        return _refused(request, conversation, action_id, error)
    reason = form.cleaned_data["reason"]
    try:
        approvals.action_reject(
            conversation_id=conversation.pk, action_id=action_id, by=request.user, reason=reason
        )
    except ServiceError as exc:
        return _refused(request, conversation, action_id, exc)
    return _decided(request, conversation, action_id, Decision.REJECTED, reason)


@login_required
@require_POST
def actions_approve_all(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    conversation = _conversation_or_404(request, conversation_id, Action.ACT)
    status = 200
    try:
        count = approvals.actions_approve_all(conversation_id=conversation.pk, by=request.user)
    except ServiceError as exc:
        notice, status = exc.detail, exc.status
    else:
        notice = f"Approved {count} action{'' if count == 1 else 's'}."
    if not request.htmx:
        return _back(request, conversation, notice if status != 200 else None)
    context = {
        "conversation_id": str(conversation.pk),
        "can_act": True,
        "cards": _pending_cards(conversation),
        "approvals_notice": notice,
        "notice_status": status if status != 200 else None,
    }
    return render(request, DETAIL_TEMPLATE + "#approvals", context, status=status)


def _waiting(request: HttpRequest) -> Any:
    ctx = team_context(request)
    return approvals.conversations_waiting(
        request.user, ctx.current_team.pk if ctx.current_team else None
    )


def _shown(waiting: list[WaitingConversation]) -> str:
    """What the list shows, in a few characters: its poll sends it back, and an unchanged
    list is answered with 204 (htmx leaves the page alone: a reason being typed survives)."""
    parts = [
        f"{w.conversation.pk}:{int(w.can_act)}:" + ",".join(c.action_id for c in w.cards)
        for w in waiting
    ]
    return hashlib.sha256(" ".join(parts).encode()).hexdigest()[:16]


@login_required
@require_GET
@vary_on_headers("HX-Request")  # the page, or (polled) just its rows
def approval_list(request: HttpRequest) -> HttpResponse:
    # Polled every 2 s: a fixed number of queries however many conversations wait.
    conversations = list(_waiting(request).select_related("team")[:WAITING_LIMIT])
    pending = approvals.pending_actions_for(c.pk for c in conversations)
    paths = ancestor_paths({c.pk: c.parent_id for c in conversations})  # by level, not by row
    roles = team_roles(request.user, {c.team_id for c in conversations})
    waiting = [
        WaitingConversation(
            conversation=c,
            cards=[approval_card(p) for p in pending[c.pk]],
            parents=paths.get(c.pk, []),
            can_act=role_allows(roles.get(c.team_id), Action.ACT),
        )
        for c in conversations
    ]
    shown = [w for w in waiting if w.cards]
    context: dict[str, Any] = {"waiting": shown, "shown": _shown(shown)}
    if not request.htmx:
        return render(request, APPROVALS_TEMPLATE, context)
    if request.GET.get("shown") == context["shown"]:
        return HttpResponse(status=204)
    context["oob_count"] = _waiting(request).count()  # the nav badge, with the list it counts
    return render(request, APPROVALS_TEMPLATE + "#approval-rows", context)


@login_required
@require_GET
def approval_count(request: HttpRequest) -> HttpResponse:
    """The nav badge: how many conversations of the current team wait (one COUNT query)."""
    context = {"count": _waiting(request).count()}
    return render(request, APPROVALS_TEMPLATE + "#approvals-count", context)
