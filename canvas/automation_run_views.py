"""One automation's run history: its runs newest first, filtered by status, each with its
conversation; admins and owners start one now (with a payload of their choosing) and retry a
failed, cancelled or skipped one (automations.manual, which checks the role again and audits).

Members read it (as /api/teams/{id}/automations/{id}/runs); another team's automation or a run
of another automation answers 404. The page is one template: the status filter swaps its
`#run-list` alone, Run now and Retry its `#runs` section; without htmx a successful post
redirects back to the page, so a reload never starts a second run.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from automations import manual, selectors
from automations.models import Automation, AutomationRun
from automations.runs import RunOutcome
from automations.vocabulary import RETRYABLE_STATUSES
from common.errors import ServiceError
from teams.models import Team
from teams.permissions import Action

from .access import http_errors
from .automation_forms import RunFilterForm, RunNowForm, run_status
from .automation_views import PAGE as AUTOMATIONS_PAGE
from .automation_views import webhook_url
from .settings_pages import administers, settings_team

TEMPLATE = "canvas/team_automation_runs.html"
PAGE_NAME = "team-automation-runs"


def _automation(
    request: HttpRequest, team_id: int, automation_id: int, action: Action
) -> tuple[Team, Automation]:
    """The team (for `action`) and its automation; 404 for one of another team."""
    team = settings_team(request, team_id, action)
    with http_errors():
        return team, selectors.automation_get(team=team, automation_id=automation_id)


def duration(run: AutomationRun) -> str:
    """From its start (or its record) to its end, for people ("4 min 5 s"); "" while it has
    not ended."""
    if run.finished_at is None:
        return ""
    seconds = max(0.0, (run.finished_at - (run.started_at or run.created_at)).total_seconds())
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _context(
    request: HttpRequest, team: Team, automation: Automation, *, status: str = "",
    filter_form: RunFilterForm | None = None, run_form: RunNowForm | None = None,
    notice: ServiceError | None = None, outcome: RunOutcome | None = None,
) -> dict[str, Any]:  # fmt: skip
    runs = selectors.run_list(
        automation=automation, status=status or None, limit=selectors.MAX_RUNS_PAGE
    )
    rows = [
        {"run": run, "duration": duration(run), "retryable": run.status in RETRYABLE_STATUSES}
        for run in runs
    ]
    return {
        "team": team,
        "automation": automation,
        "webhook_url": webhook_url(request, automation),
        "rows": rows,
        "status": status,
        "limit": selectors.MAX_RUNS_PAGE,
        "filter_form": filter_form or RunFilterForm(initial={"status": status}),
        "run_form": run_form or RunNowForm(),
        "notice": notice,
        "outcome": outcome,
        "can_administer": administers(request, team),
        # The settings page chrome (canvas/team_settings_page.html): the Automations tab.
        "page_title": f"Runs of {automation.name}",
        "settings_page": AUTOMATIONS_PAGE.page,
    }


@login_required
@require_GET
@vary_on_headers("HX-Request")  # the same URL answers the page or, filtered by htmx, its rows
def automation_runs(request: HttpRequest, team_id: int, automation_id: int) -> HttpResponse:
    team, automation = _automation(request, team_id, automation_id, Action.VIEW)
    form = RunFilterForm(request.GET)
    status = run_status(request.GET)
    template = TEMPLATE
    if request.htmx and not request.htmx.history_restore_request:
        template += "#run-list"
    context = _context(request, team, automation, status=status, filter_form=form)
    return render(request, template, context)


def _answer(
    request: HttpRequest, team: Team, automation: Automation, start: Callable[[], RunOutcome],
    **refused: Any,
) -> HttpResponse:  # fmt: skip
    """Call `start`; answer with the `#runs` section (htmx) or a redirect to the page, or,
    when the service refuses, with its words and status and the `refused` context. The
    history keeps the status filter the post came from."""
    status = run_status(request.POST)
    try:
        outcome = start()
    except ServiceError as exc:
        context = _context(request, team, automation, status=status, notice=exc, **refused)
        return _render(request, context, exc.status)
    if not request.htmx:
        return redirect(PAGE_NAME, team_id=team.pk, automation_id=automation.pk)
    return _render(request, _context(request, team, automation, status=status, outcome=outcome))


def _render(request: HttpRequest, context: dict[str, Any], status: int = 200) -> HttpResponse:
    """The `#runs` section for htmx, else the whole page."""
    chosen = f"{TEMPLATE}#runs" if request.htmx else TEMPLATE
    return render(request, chosen, context, status=status)


@login_required
@require_POST
def automation_run_now(request: HttpRequest, team_id: int, automation_id: int) -> HttpResponse:
    team, automation = _automation(request, team_id, automation_id, Action.ADMINISTER)
    form = RunNowForm(request.POST)
    if not form.is_valid():
        status = run_status(request.POST)
        return _render(
            request, _context(request, team, automation, status=status, run_form=form), 400
        )
    start = partial(
        manual.run_now, by=request.user, team=team, automation_id=automation.pk,
        payload=form.cleaned_data["payload"],
    )  # fmt: skip
    return _answer(request, team, automation, start, run_form=form)


@login_required
@require_POST
def automation_run_retry(
    request: HttpRequest, team_id: int, automation_id: int, run_id: int
) -> HttpResponse:
    team, automation = _automation(request, team_id, automation_id, Action.ADMINISTER)
    with http_errors():  # the URL names the automation: a run of another one is not found
        run = selectors.run_get(automation=automation, run_id=run_id)
    retry = partial(manual.run_retry, by=request.user, team=team, run_id=run.pk)
    return _answer(request, team, automation, retry)
