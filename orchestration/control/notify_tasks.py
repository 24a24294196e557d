"""The Celery edge of team notifications: take the facts, let orchestration.control.notify deliver,
retry what may succeed later. Imported by orchestration/tasks.py so autodiscovery finds it."""

from __future__ import annotations

import logging

from celery import shared_task

from teams.crypto import SecretDecryptionError

from .notify import NOTIFY_WEBHOOK_TASK, RetryableDeliveryError, webhook_deliver

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
BACKOFF_SECONDS = 5
"""The first retry waits this long, each later one four times longer (5 s, 20 s)."""


@shared_task(
    name=NOTIFY_WEBHOOK_TASK, bind=True, acks_late=True, ignore_result=True,
    max_retries=MAX_ATTEMPTS - 1,
)  # fmt: skip
def notify_webhook(
    self, *, delivery_id: str, conversation_id: str, team_id: int, status: str, reason: str,
    title: str, occurred_at: int,
) -> None:  # fmt: skip
    """POST one notification; up to MAX_ATTEMPTS tries, then give up with a log line. Never
    fails the task for a bad receiver: there is nobody to report it to but the log."""
    try:
        webhook_deliver(
            delivery_id=delivery_id, conversation_id=conversation_id, team_id=team_id,
            status=status, reason=reason, title=title, occurred_at=occurred_at,
        )  # fmt: skip
    except RetryableDeliveryError as exc:
        attempt = self.request.retries + 1
        if attempt >= MAX_ATTEMPTS:
            logger.warning(
                "notification %s for conversation %s not delivered after %d attempts: %s",
                delivery_id, conversation_id, attempt, exc,
            )  # fmt: skip
            return
        raise self.retry(countdown=BACKOFF_SECONDS * 4**self.request.retries) from None
    except SecretDecryptionError as exc:  # a key problem; retrying cannot fix it
        logger.error("notification %s not sent: %s", delivery_id, exc)
