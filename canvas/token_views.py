"""The user's personal API tokens page: list, create (the plain token is shown once, in the
answer that made it) and revoke. Someone else's token answers 404, like a missing one.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from common.errors import ServiceError
from teams.models import ApiToken
from teams.tokens import api_token_create, api_token_revoke

from .access import http_errors
from .team_forms import TokenCreateForm
from .team_views import _fragment

TOKENS_TEMPLATE = "canvas/tokens.html"


def _tokens_context(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    return {
        "tokens": ApiToken.objects.filter(user=request.user),
        "form": TokenCreateForm(),
        "now": timezone.now(),
        **extra,
    }


@login_required
@require_GET
def token_list(request: HttpRequest) -> HttpResponse:
    return render(request, TOKENS_TEMPLATE, _tokens_context(request))


@never_cache  # the answer holds the plain token: no cache may keep it
@login_required
@require_POST
def token_create(request: HttpRequest) -> HttpResponse:
    form = TokenCreateForm(request.POST)
    if not form.is_valid():
        context = _tokens_context(request, form=form)
        return render(request, _fragment(request, TOKENS_TEMPLATE, "tokens"), context, status=400)
    days = form.cleaned_data["expires_in_days"]
    expires_at = timezone.now() + timedelta(days=days) if days else None
    try:
        token, raw = api_token_create(
            user=request.user, name=form.cleaned_data["name"], expires_at=expires_at
        )
    except ServiceError as exc:
        context = _tokens_context(request, form=form, notice=exc)
        template = _fragment(request, TOKENS_TEMPLATE, "tokens")
        return render(request, template, context, status=exc.status)
    # Rendered straight into this response (no redirect): the plain token exists nowhere else.
    context = _tokens_context(request, new_token=token, raw_token=raw)
    return render(request, _fragment(request, TOKENS_TEMPLATE, "tokens"), context)


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    with http_errors():  # someone else's token looks exactly like a missing one
        api_token_revoke(user=request.user, token_id=token_id)
    if not request.htmx:
        return redirect("token-list")
    return render(request, f"{TOKENS_TEMPLATE}#tokens", _tokens_context(request))
