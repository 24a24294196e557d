"""What an automation's run tells the outside: an alert to the team's notification webhook
when it fails or runs past its deadline, and the completion callback to the automation's own
URL with its result.

Both are built when sent (the final answer read from the log then) and signed like team
notifications (orchestration.control.notify.signed_post: X-Canvas-Timestamp,
X-Canvas-Signature: v1=HMAC-SHA256(secret, "{timestamp}.{body}"), X-Canvas-Delivery). The
alert is signed with the team's notification secret, the callback with the automation's
webhook secret, which its receiver already holds. Text that may quote a provider or a
payload (errors, the answer) is redacted with the team's secrets once more before it leaves.
"""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.urls import NoReverseMatch, reverse

from conversations.selectors import answer_events
from orchestration.control.notify import conversation_url, signed_post
from orchestration.control.outgoing import redact_for_team
from orchestration.subagents.settle import final_answer
from teams.notifications import webhook_target_for_team

from .models import AutomationRun
from .services import webhook_secret_of

MAX_ANSWER_CHARS = 20_000
MAX_ERROR_CHARS = 1000
RUNS_PAGE = "team-automation-runs"
"""The run history page's URL name (canvas.ui_urls)."""


class Notice(StrEnum):
    FAILED = "failed"
    """To the team's notification webhook: the run failed."""
    OVERDUE = "overdue"
    """To the team's notification webhook: the run is still going past its deadline."""
    COMPLETED = "completed"
    """To the automation's callback URL: the run ended (finished, failed or cancelled)."""


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def runs_url(run: AutomationRun) -> str | None:
    automation = run.automation
    try:
        path = reverse(RUNS_PAGE, kwargs={"team_id": automation.team_id,
                                          "automation_id": automation.pk})  # fmt: skip
    except NoReverseMatch:  # the UI is not mounted (an API-only deployment)
        return None
    return settings.CANVAS_BASE_URL.rstrip("/") + path


def _conversation(run: AutomationRun) -> dict[str, Any] | None:
    if run.conversation_id is None:
        return None
    status = run.conversation.status if run.conversation else None
    return {"id": str(run.conversation_id), "url": conversation_url(str(run.conversation_id)),
            "status": status}  # fmt: skip


def _facts(run: AutomationRun, error: str) -> dict[str, Any]:
    duration = None
    if run.started_at and run.finished_at:
        duration = round((run.finished_at - run.started_at).total_seconds(), 3)
    return {
        "id": run.pk, "status": run.status, "trigger": run.trigger,
        "delivery_key": run.delivery_key, "error": error, "cost_usd": float(run.cost_usd),
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "duration_seconds": duration, "url": runs_url(run),
    }  # fmt: skip


def alert_payload(run: AutomationRun, notice: Notice) -> dict[str, Any]:
    """Slack's {"text", "blocks"} plus the facts, like conversation notifications."""
    automation = run.automation
    (error,) = redact_for_team(automation.team_id, [run.error[:MAX_ERROR_CHARS]])
    name = _slack_escape(automation.name)
    if notice == Notice.OVERDUE:
        minutes = automation.deadline_minutes
        text = f":hourglass: Automation “{name}” run {run.pk} is still going after {minutes} min"
    else:
        text = f":x: Automation “{name}” run {run.pk} failed"
        if error:
            text += f": {_slack_escape(error)}"
    link = (_conversation(run) or {}).get("url") or runs_url(run)
    if link:
        text += f" <{link}|Open>"
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": text}},
            {"type": "context",
             "elements": [{"type": "mrkdwn", "text": f"trigger: `{run.trigger}`"}]},
        ],
        "type": f"automation.run_{notice}",
        "occurred_at": int(time.time()),
        "automation": {"id": automation.pk, "name": automation.name},
        "run": _facts(run, error),
        "conversation": _conversation(run),
    }  # fmt: skip


def callback_payload(run: AutomationRun) -> dict[str, Any]:
    automation = run.automation
    answer = ""
    if run.conversation_id is not None:
        events = answer_events([run.conversation_id])[str(run.conversation_id)]
        answer = final_answer(events)[0][-MAX_ANSWER_CHARS:]
    error, answer = redact_for_team(automation.team_id, [run.error[:MAX_ERROR_CHARS], answer])
    return {
        "type": "automation.run_completed",
        "occurred_at": int(time.time()),
        "automation": {"id": automation.pk, "name": automation.name},
        "run": _facts(run, error),
        "final_answer": answer,
        "conversation": _conversation(run),
    }


def notice_deliver(*, run_id: int, notice: str, delivery_id: str) -> bool:
    """Send one notice of run `run_id`. False when there is nothing to send any more (the
    run, the team's webhook or the callback URL gone) or the receiver refused it for good;
    raises orchestration.control.notify.RetryableDeliveryError when a later try may work."""
    run = (
        AutomationRun.objects.filter(pk=run_id).select_related("automation", "conversation").first()
    )
    if run is None:
        return False
    automation = run.automation
    if Notice(notice) == Notice.COMPLETED:
        if not automation.callback_url:
            return False
        return signed_post(
            url=automation.callback_url, secret=webhook_secret_of(automation),
            payload=callback_payload(run), delivery_id=delivery_id,
            what=f"completion callback of automation {automation.pk}",
        )  # fmt: skip
    target = webhook_target_for_team(automation.team_id)
    if target is None:
        return False
    return signed_post(
        url=target.url, secret=target.secret, payload=alert_payload(run, Notice(notice)),
        delivery_id=delivery_id, what=f"notification webhook (automation {automation.pk})",
    )  # fmt: skip
