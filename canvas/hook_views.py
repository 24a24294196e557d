"""The team's "Hooks & notifications" page: parse, call one service (teams.hooks,
teams.notifications, teams.policies for the sandbox's network), choose a template.

Admins and owners only, the page included (commands and webhook URLs may reveal internals):
another team answers 404, a weaker role 403. A refused write comes back inline in the section
that made it, with the service's status. The signing secret is rendered straight into the one
answer that generated it and never stored anywhere the page can read it again.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from common.errors import InvalidInput, ServiceError
from teams import hooks, notifications
from teams.models import (
    HOOK_TIMEOUT_MAX,
    HOOK_TIMEOUT_MIN,
    Hook,
    HookEvent,
    Policy,
    Team,
)
from teams.permissions import Action
from teams.policies import policy_for_team, policy_update
from teams.vocabulary import NetworkAccess

from .settings_pages import SettingsPage, edit_rows

TEMPLATE = "canvas/team_hooks.html"


class HookForm(forms.Form):
    """Shape and size only; the rules (name pattern, regex, uniqueness) are teams.hooks'."""

    name = forms.CharField(
        max_length=64, widget=forms.TextInput(attrs={"placeholder": "e.g. block-force-push"})
    )
    event = forms.ChoiceField(choices=HookEvent.choices)
    matcher = forms.CharField(
        max_length=hooks.MAX_MATCHER_CHARS, required=False, label="Tool matcher",
        widget=forms.TextInput(attrs={"placeholder": "regex on the tool name; empty: all"}),
    )  # fmt: skip
    command = forms.CharField(
        max_length=hooks.MAX_COMMAND_CHARS, strip=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
    )  # fmt: skip
    timeout_seconds = forms.IntegerField(
        min_value=HOOK_TIMEOUT_MIN, max_value=HOOK_TIMEOUT_MAX, initial=10,
        label="Timeout (seconds)",
    )  # fmt: skip
    position = forms.IntegerField(
        min_value=0, max_value=1_000_000, required=False, label="Run order",
        widget=forms.NumberInput(attrs={"placeholder": "last"}),
    )  # fmt: skip
    fail_closed = forms.BooleanField(required=False, label="Block the step when the hook fails")
    enabled = forms.BooleanField(required=False, initial=True)


class NotificationForm(forms.Form):
    url = forms.CharField(
        max_length=notifications.MAX_URL_CHARS, label="Webhook URL",
        widget=forms.TextInput(attrs={"placeholder": "https://hooks.slack.com/services/…"}),
    )  # fmt: skip
    regenerate_secret = forms.BooleanField(required=False, label="Make a new signing secret")


class SandboxForm(forms.Form):
    network = forms.ChoiceField(
        choices=NetworkAccess.choices, label="Network for commands and hooks"
    )


def _hook_form(hook: Hook) -> HookForm:
    # Every row's form is on the page at once: ids must differ, names stay plain.
    initial = {key: getattr(hook, key) for key in HookForm.base_fields}
    return HookForm(initial=initial, auto_id=f"id_hook{hook.pk}_%s")


def _context(
    request: HttpRequest, team: Team, *, add_form: HookForm | None = None,
    edited: tuple[int, HookForm] | None = None, notify_form: NotificationForm | None = None,
    notice: ServiceError | None = None, notify_notice: ServiceError | None = None,
    new_secret: str | None = None, sandbox_form: SandboxForm | None = None,
    sandbox_notice: ServiceError | None = None,
) -> dict[str, Any]:  # fmt: skip
    rows = edit_rows(
        hooks.hook_list(by=request.user, team=team), key=lambda hook: hook.pk, edited=edited,
        row_id=lambda hook, _: f"hook-{hook.pk}", form_for=lambda hook, _: _hook_form(hook),
    )  # fmt: skip
    info = notifications.notification_get(by=request.user, team=team)
    own = Policy.objects.filter(team=team).values_list("network", flat=True).first()
    return {
        "team": team,
        "can_administer": True,  # the page is for admins only
        "rows": rows,
        "add_form": add_form or HookForm(),
        "notification": info,
        "notify_form": notify_form or NotificationForm(initial={"url": info.url if info else ""}),
        "notice": notice,
        "notify_notice": notify_notice,
        "new_secret": new_secret,
        "sandbox_form": sandbox_form or SandboxForm(initial={"network": own or "none"}),
        "sandbox_notice": sandbox_notice,
        "network": policy_for_team(team.pk).network,
        "host_network_allowed": settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK,
    }


PAGE = SettingsPage(
    TEMPLATE, "team-hooks", _context, "Hooks & notifications", shown_to=Action.ADMINISTER
)

team_hooks = PAGE.view()


@login_required
@require_POST
def hook_add(request: HttpRequest, team_id: int) -> HttpResponse:
    team = PAGE.team(request, team_id)
    form = HookForm(request.POST)
    create = partial(hooks.hook_create, by=request.user, team=team)
    return PAGE.submit(request, team, "hooks", form, create, add_form=form)


@login_required
@require_POST
def hook_edit(request: HttpRequest, team_id: int, hook_id: int) -> HttpResponse:
    team = PAGE.team(request, team_id)
    form = HookForm(request.POST, auto_id=f"id_hook{hook_id}_%s")
    update = partial(hooks.hook_update, by=request.user, team=team, hook_id=hook_id)
    return PAGE.submit(request, team, "hooks", form, update, edited=(hook_id, form))


def _enable(*, enabled: str | None, **target: Any) -> None:
    if enabled not in ("true", "false"):
        raise InvalidInput("enabled must be true or false.")
    hooks.hook_update(enabled=enabled == "true", **target)


@login_required
@require_POST
def hook_enable(request: HttpRequest, team_id: int, hook_id: int) -> HttpResponse:
    """Sets `enabled` to the posted value (not a toggle), so a repeated click is harmless."""
    team = PAGE.team(request, team_id)
    enable = partial(
        _enable, enabled=request.POST.get("enabled"), by=request.user, team=team, hook_id=hook_id
    )
    return PAGE.write(request, team, "hooks", enable)


@login_required
@require_POST
def hook_delete(request: HttpRequest, team_id: int, hook_id: int) -> HttpResponse:
    team = PAGE.team(request, team_id)
    delete = partial(hooks.hook_delete, by=request.user, team=team, hook_id=hook_id)
    return PAGE.write(request, team, "hooks", delete)


@never_cache  # the answer may hold the new signing secret: no cache may keep it
@login_required
@require_POST
def notification_set(request: HttpRequest, team_id: int) -> HttpResponse:
    team = PAGE.team(request, team_id)
    form = NotificationForm(request.POST)
    if not form.is_valid():
        return PAGE.answer(request, team, "notifications", status=400, notify_form=form)
    try:
        info = notifications.notification_set(by=request.user, team=team, **form.cleaned_data)
    except ServiceError as exc:
        return PAGE.answer(
            request, team, "notifications", status=exc.status, notify_form=form,
            notify_notice=exc,
        )  # fmt: skip
    # Shown in this one answer, even without htmx: it is never readable again.
    return PAGE.answer(
        request, team, "notifications", shows_once=bool(info.secret), new_secret=info.secret
    )


@login_required
@require_POST
def notification_clear(request: HttpRequest, team_id: int) -> HttpResponse:
    team = PAGE.team(request, team_id)
    clear = partial(notifications.notification_clear, by=request.user, team=team)
    return PAGE.write(request, team, "notifications", clear, notice_as="notify_notice")


@login_required
@require_POST
def sandbox_set(request: HttpRequest, team_id: int) -> HttpResponse:
    """The team policy's network; "host" is refused (400) where the site does not allow it."""
    team = PAGE.team(request, team_id)
    form = SandboxForm(request.POST)
    update = partial(policy_update, by=request.user, team=team)
    return PAGE.submit(
        request, team, "sandbox", form, update, notice_as="sandbox_notice", sandbox_form=form
    )
