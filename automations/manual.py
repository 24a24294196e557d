"""Runs a person starts: Run now (with a payload of their choosing) and Retry (a failed,
cancelled or skipped run again, with its recorded payload).

Both are admin-only (they spend the team's budget and use the automation's secrets) and
audited. The filter is not applied: a person chose to run it. The prompt is rendered from
the automation's template as it is now, so a retry after fixing a template succeeds; a field
the payload lacks is a `failed` run naming it, as for a delivery. The run then goes through
automations.runs like any other, concurrency rule included.
"""

from __future__ import annotations

import uuid
from functools import partial
from typing import Any

from django.db import transaction

from common.errors import Conflict, InvalidInput, NotFound
from conversations.redaction import redactor_for_team
from teams.audit import audit_record
from teams.models import Team
from teams.permissions import require_admin

from .models import Automation, AutomationRun
from .runs import RunOutcome, run_start
from .templating import TemplateError, render
from .vocabulary import RETRYABLE_STATUSES, RunStatus, Trigger
from .webhooks import payload_problem

MAX_PAYLOAD_KEYS = 1000


_require_admin = partial(require_admin, what="run automations by hand")


def _automation(team: Team, automation_id: int) -> Automation:
    automation = Automation.objects.filter(team=team, pk=automation_id).first()
    if automation is None:
        raise NotFound("no such automation.")
    return automation


def _check_payload(payload: Any) -> dict[str, Any]:
    if payload is None:
        return {}
    if not isinstance(payload, dict) or len(payload) > MAX_PAYLOAD_KEYS:
        raise InvalidInput(f"the payload must be a JSON object of at most {MAX_PAYLOAD_KEYS} keys.")
    problem = payload_problem(payload)
    if problem is not None:
        raise InvalidInput(problem)
    return payload


def _start(
    automation: Automation, *, by, payload: dict[str, Any], key: str, kind: str,
    retry_of: AutomationRun | None = None,
) -> RunOutcome:  # fmt: skip
    try:
        prompt, status, error = render(automation.prompt_template, payload), RunStatus.ACCEPTED, ""
    except TemplateError as exc:
        prompt, status, error = "", RunStatus.FAILED, str(exc)
    redactor = redactor_for_team(automation.team_id, automation.team.secrets_version)
    if redactor is not None:
        payload, prompt = redactor.redact_value(payload), redactor.redact(prompt)
    with transaction.atomic():
        run = AutomationRun.objects.create(
            automation=automation, trigger=Trigger.MANUAL, delivery_key=key, payload=payload,
            prompt=prompt, status=status, error=error, retry_of=retry_of,
            started_by=by if getattr(by, "is_authenticated", False) else None,
        )  # fmt: skip
        audit_record(
            actor=by, kind=kind, team=automation.team, target=automation.name,
            data={"run": run.pk, **({"retry_of": retry_of.pk} if retry_of else {})},
        )  # fmt: skip
    if status == RunStatus.FAILED:
        return RunOutcome(run)
    return run_start(run_id=run.pk)


def run_now(
    *, by, team: Team, automation_id: int, payload: dict[str, Any] | None = None
) -> RunOutcome:
    """A run of the automation now, disabled or not (a person may try one before enabling
    it), with `payload` (default {}) as its trigger's payload."""
    _require_admin(by, team)
    automation = _automation(team, automation_id)
    return _start(
        automation, by=by, payload=_check_payload(payload),
        key=f"manual:{uuid.uuid4().hex}", kind="automation.run_now",
    )  # fmt: skip


def run_retry(*, by, team: Team, run_id: int) -> RunOutcome:
    """The run `run_id` again as a new run (the old one stays in the history, linked)."""
    _require_admin(by, team)
    old = (
        AutomationRun.objects.filter(pk=run_id, automation__team=team)
        .select_related("automation__team")
        .first()
    )
    if old is None:
        raise NotFound("no such run.")
    if old.status not in RETRYABLE_STATUSES:
        allowed = ", ".join(sorted(RETRYABLE_STATUSES))
        raise Conflict(f"only {allowed} runs can be retried; this one is {old.status}.")
    return _start(
        old.automation, by=by, payload=old.payload, retry_of=old,
        key=f"retry:{old.pk}:{uuid.uuid4().hex}", kind="automation.run_retried",
    )  # fmt: skip
