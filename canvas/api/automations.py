"""/api/teams/{id}/automations: webhook and schedule automations and their runs.

Members read; admins and owners write (automations.services checks and audits each change).
The webhook secret appears in exactly one answer, the one that made it: creation, or a
rotation. No other answer holds it, and the secret is stored encrypted.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from ninja import Query, Router, Schema, Status
from pydantic import Field

from automations import manual, selectors, services
from automations.fields import MAX_DEADLINE_MINUTES, MAX_SECRETS, MAX_TEMPLATE_CHARS, MAX_URL_CHARS
from automations.filters import MAX_FILTER_CHARS
from automations.models import Automation, AutomationRun
from common.inputs import Id, Int, Money, Text
from teams.permissions import Action
from teams.services import team_get_for
from teams.vocabulary import ConfirmationModeName, RiskName
from workspaces.spec import spec_of

from . import ERRORS
from .conversations import WorkspaceIn, WorkspaceOut

router = Router(tags=["automations"])

TEMPLATE_HELP = "{{ payload.a.b }} substitutions (list items by number); nothing else runs."


class LimitsIn(Schema):
    """The runs' tightening of the team policy; each only as strict or stricter."""

    confirmation_mode: ConfirmationModeName | None = None
    risk_threshold: RiskName | None = None
    max_iterations: Int(ge=1, le=10_000) | None = None
    tools: list[Text(64)] | None = Field(default=None, max_length=50)


class AutomationFields(Schema):
    """Fields to change; one left out (or null) keeps its value."""

    name: Text(64) | None = Field(default=None, description="Letters, digits and _ . -.")
    trigger: Text(16) | None = Field(default=None, description='"webhook" or "schedule".')
    cron: Text(100) | None = Field(default=None, description="For schedules, e.g. 0 3 * * 1-5.")
    timezone: Text(64) | None = Field(default=None, description="IANA name; default UTC.")
    missed: Text(16) | None = Field(
        default=None,
        description='Schedule slots missed while down: "skip" (default; the latest fires if '
        'at most max(2 beat periods, 60 s) late) or "once" (one run for them all, however late).',
    )
    prompt_template: Text(MAX_TEMPLATE_CHARS) | None = Field(
        default=None, description=TEMPLATE_HELP
    )
    filter: Text(MAX_FILTER_CHARS) | None = Field(
        default=None, description="JMESPath over the payload; a truthy result runs. Empty: all."
    )
    model: Text(200) | None = Field(default=None, description="Model profile; default: site's.")
    agent: Text(64) | None = Field(default=None, description="An ACP profile; empty: ours.")
    workspace: WorkspaceIn | None = None
    concurrency: Text(16) | None = Field(
        default=None, description='While the previous run goes: "skip", "queue" or "cancel".'
    )
    enabled: bool | None = None
    max_cost_usd: Money | Literal[""] | None = Field(
        default=None, description='Budget per run, USD; "" removes it (the policy\'s limit only).'
    )
    allowed_secrets: list[Text(64)] | None = Field(
        default=None, max_length=MAX_SECRETS,
        description="Team secrets a run may use by name; empty (the default): none.",
    )  # fmt: skip
    callback_url: Text(MAX_URL_CHARS) | None = Field(
        default=None,
        description="Each run's result (status, final answer, conversation link) is POSTed "
        "here, signed with the webhook secret like team notifications. Empty: none.",
    )
    deadline_minutes: Int(ge=1, le=MAX_DEADLINE_MINUTES) | None = Field(
        default=None, description="A run going longer alerts the team's notification webhook."
    )
    limits: LimitsIn | None = Field(
        default=None, description="Tighter than the team policy for its runs (our agent only)."
    )


class AutomationIn(AutomationFields):
    name: Text(64, min_length=1) = Field(description="Letters, digits and _ . -.")
    trigger: Text(16, min_length=1) = Field(description='"webhook" or "schedule".')
    prompt_template: Text(MAX_TEMPLATE_CHARS, min_length=1) = Field(description=TEMPLATE_HELP)


class AutomationOut(Schema):
    id: int
    team: int
    name: str
    enabled: bool
    trigger: str
    cron: str
    timezone: str
    missed: str
    prompt_template: str
    filter: str
    model: str
    agent: str
    workspace: WorkspaceOut
    concurrency: str
    max_cost_usd: float | None
    allowed_secrets: list[str]
    callback_url: str
    deadline_minutes: int
    limits: dict[str, Any]
    webhook_url: str
    created_by: str | None
    created_at: datetime
    updated_at: datetime


class AutomationSecretOut(AutomationOut):
    webhook_secret: str = Field(description="Shown in this answer only; keep it.")


class RunOut(Schema):
    id: int
    trigger: str = Field(description='"webhook", "schedule" or "manual" (Run now, Retry).')
    retry_of: int | None = None
    started_by: str | None = Field(default=None, description="Who ran it by hand.")
    status: str
    delivery_key: str
    conversation_id: uuid.UUID | None
    conversation_status: str | None
    prompt: str
    error: str
    cost_usd: float
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class RunFilter(Schema):
    status: Text(16) | None = None
    limit: Int(ge=1, le=selectors.MAX_RUNS_PAGE) = 50


def _out(request: HttpRequest, a: Automation) -> dict[str, Any]:
    return {
        "id": a.pk, "team": a.team_id, "name": a.name, "enabled": a.enabled,
        "trigger": a.trigger, "cron": a.cron, "timezone": a.timezone, "missed": a.missed,
        "prompt_template": a.prompt_template, "filter": a.filter, "model": a.model,
        "agent": a.agent, "workspace": spec_of(a.workspace_spec).as_json(),
        "concurrency": a.concurrency,
        "max_cost_usd": float(a.max_cost_usd) if a.max_cost_usd is not None else None,
        "allowed_secrets": list(a.allowed_secrets), "callback_url": a.callback_url,
        "deadline_minutes": a.deadline_minutes, "limits": dict(a.limits or {}),
        "webhook_url": request.build_absolute_uri(reverse("automation-webhook", args=[a.pk])),
        "created_by": a.created_by.get_username() if a.created_by else None,
        "created_at": a.created_at, "updated_at": a.updated_at,
    }  # fmt: skip


def _with_secret(request: HttpRequest, response: HttpResponse, made: services.WithSecret):
    response["Cache-Control"] = "no-store"  # no cache or proxy may keep the one copy
    return {**_out(request, made.automation), "webhook_secret": made.secret}


def _run(r: AutomationRun) -> dict[str, Any]:
    return {
        "id": r.pk, "trigger": r.trigger, "status": r.status, "delivery_key": r.delivery_key,
        "conversation_id": r.conversation_id,
        "conversation_status": r.conversation.status if r.conversation else None,
        "prompt": r.prompt, "error": r.error, "cost_usd": float(r.cost_usd),
        "retry_of": r.retry_of_id,
        "started_by": r.started_by.get_username() if r.started_by else None,
        "created_at": r.created_at, "started_at": r.started_at, "finished_at": r.finished_at,
    }  # fmt: skip


def _fields(body: AutomationFields) -> dict[str, Any]:
    given = body.model_dump(exclude={"workspace", "limits"})
    given["limits"] = body.limits.model_dump(exclude_none=True) if body.limits else None
    given["workspace_spec"] = body.workspace.model_dump() if body.workspace else None
    return given


@router.get("/{team_id}/automations", response={200: list[AutomationOut], **ERRORS})
def automation_list(request: HttpRequest, team_id: Id):
    team = team_get_for(request.user, team_id, Action.VIEW)
    return [_out(request, a) for a in selectors.automation_list(team=team)]


@router.post("/{team_id}/automations", response={201: AutomationSecretOut, **ERRORS})
def automation_create(
    request: HttpRequest, response: HttpResponse, team_id: Id, body: AutomationIn
):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    made = services.automation_create(by=request.user, team=team, **_fields(body))
    return Status(201, _with_secret(request, response, made))


@router.get("/{team_id}/automations/{automation_id}", response={200: AutomationOut, **ERRORS})
def automation_get(request: HttpRequest, team_id: Id, automation_id: Id):
    team = team_get_for(request.user, team_id, Action.VIEW)
    return _out(request, selectors.automation_get(team=team, automation_id=automation_id))


@router.api_operation(
    ["PUT", "PATCH"], "/{team_id}/automations/{automation_id}",
    response={200: AutomationOut, **ERRORS},
)  # fmt: skip
def automation_update(request: HttpRequest, team_id: Id, automation_id: Id, body: AutomationFields):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    automation = services.automation_update(
        by=request.user, team=team, automation_id=automation_id, **_fields(body)
    )
    return _out(request, automation)


@router.delete("/{team_id}/automations/{automation_id}", response={204: None, **ERRORS})
def automation_delete(request: HttpRequest, team_id: Id, automation_id: Id):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    services.automation_delete(by=request.user, team=team, automation_id=automation_id)
    return Status(204, None)


@router.post(
    "/{team_id}/automations/{automation_id}/rotate-secret",
    response={200: AutomationSecretOut, **ERRORS},
)
def automation_rotate_secret(
    request: HttpRequest, response: HttpResponse, team_id: Id, automation_id: Id
):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    made = services.automation_rotate_secret(
        by=request.user, team=team, automation_id=automation_id
    )
    return _with_secret(request, response, made)


@router.get("/{team_id}/automations/{automation_id}/runs", response={200: list[RunOut], **ERRORS})
def automation_runs(
    request: HttpRequest, team_id: Id, automation_id: Id, filters: Query[RunFilter]
):
    team = team_get_for(request.user, team_id, Action.VIEW)
    automation = selectors.automation_get(team=team, automation_id=automation_id)
    runs = selectors.run_list(automation=automation, status=filters.status, limit=filters.limit)
    return [_run(r) for r in runs]


class RunNowIn(Schema):
    payload: dict[str, Any] | None = Field(
        default=None, description="The trigger's payload for the template; default {}."
    )


def _run_answer(outcome) -> Status:
    run = AutomationRun.objects.select_related("conversation", "started_by").get(pk=outcome.run.pk)
    return Status(202 if run.conversation_id else 200, _run(run))


@router.post(
    "/{team_id}/automations/{automation_id}/runs",
    response={200: RunOut, 202: RunOut, **ERRORS},
)
def automation_run_now(request: HttpRequest, team_id: Id, automation_id: Id, body: RunNowIn):
    """Run it now (admins): 202 with the run when its conversation started, 200 when it
    did not (skipped by the concurrency rule, queued, or failed: see status and error)."""
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    outcome = manual.run_now(
        by=request.user, team=team, automation_id=automation_id, payload=body.payload
    )
    return _run_answer(outcome)


@router.post(
    "/{team_id}/automations/{automation_id}/runs/{run_id}/retry",
    response={200: RunOut, 202: RunOut, **ERRORS},
)
def automation_run_retry(request: HttpRequest, team_id: Id, automation_id: Id, run_id: Id):
    """A failed, cancelled or skipped run again, as a new run with the same payload."""
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    automation = selectors.automation_get(team=team, automation_id=automation_id)
    run = selectors.run_get(automation=automation, run_id=run_id)
    return _run_answer(manual.run_retry(by=request.user, team=team, run_id=run.pk))
