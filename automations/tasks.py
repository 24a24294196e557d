"""Celery edges of automations."""

from __future__ import annotations

import logging

from celery import shared_task

logger = logging.getLogger(__name__)

NOTICE_ATTEMPTS = 3
NOTICE_BACKOFF_SECONDS = 5
"""The first retry waits this long, each later one four times longer (5 s, 20 s)."""


@shared_task(name="automations.start_pending_runs", ignore_result=True)
def start_pending_runs() -> int:
    from .runs import start_pending_runs as start

    return start()


@shared_task(name="automations.fire_schedules", ignore_result=True)
def fire_schedules() -> int:
    from .schedules import fire_schedules as fire

    return fire()


@shared_task(name="automations.send_notices", ignore_result=True)
def send_notices() -> int:
    from .outbox import notices_send

    return notices_send()


@shared_task(
    name="automations.send_notice", bind=True, acks_late=True, ignore_result=True,
    max_retries=NOTICE_ATTEMPTS - 1,
)  # fmt: skip
def send_notice(self, *, run_id: int, notice: str, delivery_id: str) -> None:
    """POST one notice; up to NOTICE_ATTEMPTS tries, then a log line (there is nobody else
    to tell that the team's receiver is broken)."""
    from orchestration.control.notify import RetryableDeliveryError
    from teams.crypto import SecretDecryptionError

    from .notices import notice_deliver

    try:
        notice_deliver(run_id=run_id, notice=notice, delivery_id=delivery_id)
    except RetryableDeliveryError as exc:
        attempt = self.request.retries + 1
        if attempt >= NOTICE_ATTEMPTS:
            logger.warning(
                "the %s notice of automation run %s not delivered after %d attempts: %s",
                notice, run_id, attempt, exc,
            )  # fmt: skip
            return
        raise self.retry(countdown=NOTICE_BACKOFF_SECONDS * 4**self.request.retries) from None
    except SecretDecryptionError as exc:  # a key problem; retrying cannot fix it
        logger.error("the %s notice of automation run %s not sent: %s", notice, run_id, exc)
