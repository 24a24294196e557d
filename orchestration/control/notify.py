"""Telling a team, through its notification webhook (teams.notifications), that a conversation
needs a person or stopped: waiting for approval, finished, failed, stuck.

The runner calls `notify_status_on_commit` while it records the status; nothing leaves before
that transaction commits, and nothing at all for teams without a webhook (one indexed read).
The Celery task (orchestration.control.notify_tasks, which imports this module and never the other way
round: it is enqueued by name) re-reads the URL and secret, so the secret never travels through
the broker, and calls `webhook_deliver`. The reason and the title are
redacted with the team's secrets before they are queued.

The request is Slack-compatible JSON ({"text", "blocks"} plus our "conversation" object),
signed like this so receivers can check it came from us and is fresh:

    X-Canvas-Timestamp: <unix seconds>
    X-Canvas-Signature: v1=<hex HMAC-SHA256(secret, f"{timestamp}.{body}")>
    X-Canvas-Delivery: <id shared by every attempt of one notification, to drop duplicates>

Delivery is at least once: a retry or a redelivered task may repeat a POST.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import time
import uuid
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.urls import reverse

from common import netguard, safe_http
from teams.notifications import notification_configured, url_host, webhook_target_for_team

from .outgoing import redact_for_team

logger = logging.getLogger(__name__)

NOTIFY_WEBHOOK_TASK = "orchestration.notify_webhook"
"""The delivery task's name (orchestration.control.notify_tasks)."""
TIMEOUT_SECONDS = 5.0
MAX_TITLE_CHARS = 200
MAX_REASON_CHARS = 500
RETRY_STATUSES = frozenset({408, 425, 429})
"""Besides every 5xx: answers that mean "try again later"."""

PHRASES = {
    "waiting_for_confirmation": ("needs approval", ":raised_hand:"),
    "finished": ("finished", ":white_check_mark:"),
    "error": ("stopped with an error", ":x:"),
    "stuck": ("is stuck", ":warning:"),
}


class RetryableDeliveryError(Exception):
    """The receiver or the network failed in a way a later attempt may not."""


def notify_status_on_commit(
    *, conversation_id: str, team_id: int, status: str, reason: str, title: str
) -> None:
    """Send the team's webhook a notification once the current transaction commits. Does
    nothing when the team has no webhook. Never raises: a notification must not break a run."""
    try:
        if not notification_configured(team_id):
            return
        # Redacted here, before the broker: a reason may quote a provider's error or a
        # hook, neither of which went through the log's door.
        reason, title = redact_for_team(team_id, [reason or "", title or ""])
        kwargs = {
            "delivery_id": uuid.uuid4().hex,
            "conversation_id": str(conversation_id),
            "team_id": int(team_id),
            "status": str(status),
            "reason": (reason or "")[:MAX_REASON_CHARS],
            "title": (title or "")[:MAX_TITLE_CHARS],
            "occurred_at": int(time.time()),
        }
        transaction.on_commit(lambda: _enqueue(kwargs), robust=True)
    except Exception:
        logger.exception("could not schedule a notification for conversation %s", conversation_id)


def _enqueue(kwargs: dict[str, Any]) -> None:
    try:
        task = current_app.tasks.get(NOTIFY_WEBHOOK_TASK)
        if task is not None:  # registered: orchestration.tasks imports notify_tasks
            task.apply_async(kwargs=kwargs)
        else:
            current_app.send_task(NOTIFY_WEBHOOK_TASK, kwargs=kwargs)
    except Exception:  # the broker being down must not surface in the committed caller
        logger.exception(
            "could not enqueue a notification for conversation %s", kwargs["conversation_id"]
        )


def conversation_url(conversation_id: str) -> str:
    path = reverse("conversation-detail", kwargs={"conversation_id": uuid.UUID(conversation_id)})
    return settings.CANVAS_BASE_URL.rstrip("/") + path


def _slack_escape(text: str) -> str:
    # Slack reads <...> as links and mentions (<!channel>); a title must not ping a channel.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def build_payload(
    *, conversation_id: str, status: str, reason: str, title: str, occurred_at: int
) -> dict[str, Any]:
    """The JSON body: Slack's {"text", "blocks"} plus the facts for other receivers."""
    url = conversation_url(conversation_id)
    phrase, emoji = PHRASES.get(status, (f"is now {status}", ":information_source:"))
    name = _slack_escape(title or "Untitled conversation")
    text = f"{emoji} Conversation “{name}” {phrase}"
    if reason:
        text += f": {_slack_escape(reason)}"
    text += f" <{url}|Open>"
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": text}},
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": f"status: `{status}`"}],
            },
        ],
        "type": "conversation.status",
        "occurred_at": occurred_at,
        "conversation": {
            "id": conversation_id,
            "title": title,
            "status": status,
            "reason": reason,
            "url": url,
        },
    }


def signature(secret: str, timestamp: str, body: str) -> str:
    """The X-Canvas-Signature value for `body` sent at `timestamp`."""
    digest = hmac.new(secret.encode(), f"{timestamp}.{body}".encode(), hashlib.sha256)
    return f"v1={digest.hexdigest()}"


def webhook_deliver(
    *, delivery_id: str, conversation_id: str, team_id: int, status: str, reason: str,
    title: str, occurred_at: int,
) -> bool:  # fmt: skip
    """POST one notification. True when the receiver took it, False when there is nothing to
    do, the target is refused (common.netguard, checked again after resolving, and the
    connection made to the checked address) or the receiver refused for good (4xx, a
    redirect). Raises RetryableDeliveryError for timeouts, network errors, a name that does
    not resolve, 5xx and 429. Log lines name the host only: the URL and the secret are
    credentials."""
    target = webhook_target_for_team(team_id)
    if target is None:  # cleared since the notification was scheduled
        return False
    payload = build_payload(
        conversation_id=conversation_id, status=status, reason=reason, title=title,
        occurred_at=occurred_at,
    )  # fmt: skip
    return signed_post(
        url=target.url, secret=target.secret, payload=payload, delivery_id=delivery_id,
        what=f"notification webhook (conversation {conversation_id})",
    )  # fmt: skip


def signed_post(*, url: str, secret: str, payload: dict[str, Any], delivery_id: str,
                what: str) -> bool:  # fmt: skip
    """POST `payload` as JSON signed with `secret` (the module's docstring has the headers).
    True when the receiver took it; False when the target is refused (common.netguard,
    checked again after resolving, the connection made to the checked address) or the
    receiver refused for good (4xx, a redirect). Raises RetryableDeliveryError for timeouts,
    network errors, a name that does not resolve, 5xx and 429. Log lines name the host and
    `what`, never the URL or the secret: both are credentials."""
    host = url_host(url)
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "User-Agent": "agent-canvas-notify/1",
        "X-Canvas-Timestamp": timestamp,
        "X-Canvas-Signature": signature(secret, timestamp, body),
        "X-Canvas-Delivery": delivery_id,
    }
    try:
        code = safe_http.post(
            url, body.encode(), headers=headers, timeout=TIMEOUT_SECONDS,
            allowed_networks=netguard.site_allowed_networks(),
        )  # fmt: skip
    except netguard.BlockedURL as exc:  # saved before the rule, or its name now resolves there
        logger.warning("%s at %s not called for delivery %s: %s", what, host, delivery_id, exc)
        return False
    except netguard.UnresolvableHost:
        raise RetryableDeliveryError(f"{host}: the name does not resolve") from None
    except (OSError, http.client.HTTPException) as exc:  # timeouts, resets, TLS
        raise RetryableDeliveryError(f"{host}: {type(exc).__name__}") from None
    if 200 <= code < 300:
        return True
    if code >= 500 or code in RETRY_STATUSES:
        raise RetryableDeliveryError(f"{host}: HTTP {code}")
    logger.warning("%s at %s refused delivery %s: HTTP %s", what, host, delivery_id, code)
    return False
