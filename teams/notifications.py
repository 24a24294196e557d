"""A team's notification webhook: where status changes of its conversations are POSTed.

The signing secret is generated here, stored Fernet-encrypted (teams.crypto) and shown once,
when it is made; afterwards only its existence is visible. Webhook URLs often carry a
credential of their own (Slack's do, in the path), so the audit log and log lines name the
host only. Admins and owners only.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from urllib.parse import urlsplit

from django.db import transaction

from common import secret_values
from common.errors import InvalidInput, NotFound

from . import crypto
from .audit import audit_record
from .models import Team, TeamNotification
from .outbound import outbound_url_check
from .permissions import acting_user, require_admin

MAX_URL_CHARS = 500
SECRET_PREFIX = "whsec_"
_SECRET_LABEL = "NOTIFY_WEBHOOK_SECRET"
"""The name the logging filter knows the decrypted secret by."""


@dataclass(frozen=True, slots=True)
class NotificationInfo:
    """What an admin may see. `secret` is set only in the answer that generated it."""

    url: str
    updated_at: datetime
    secret: str | None = None


@dataclass(frozen=True, slots=True)
class WebhookTarget:
    """Where to send and how to sign. For the delivering worker only: never log or return."""

    url: str
    secret: str


_require_admin = partial(require_admin, what="manage notifications")


def url_host(url: str) -> str:
    """The part of a webhook URL that is safe to record."""
    return urlsplit(url).hostname or ""


def _clean_url(url: object) -> str:
    url = url.strip() if isinstance(url, str) else ""
    if not url:
        raise InvalidInput("give the webhook URL.")
    if len(url) > MAX_URL_CHARS:
        raise InvalidInput(f"the webhook URL must be at most {MAX_URL_CHARS} characters.")
    outbound_url_check(url, what="the webhook URL")
    return url


def _new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def notification_get(*, by, team: Team) -> NotificationInfo | None:
    _require_admin(by, team)
    row = TeamNotification.objects.filter(team=team).first()
    return NotificationInfo(url=row.webhook_url, updated_at=row.updated_at) if row else None


def notification_set(
    *, by, team: Team, url: str, regenerate_secret: bool = False
) -> NotificationInfo:
    """Point the team's notifications at `url`. A new signing secret is made the first time,
    or when asked; it is in the answer then and never again."""
    _require_admin(by, team)
    url = _clean_url(url)
    with transaction.atomic():
        row = TeamNotification.objects.select_for_update().filter(team=team).first()
        created = row is None
        before = None if row is None else url_host(row.webhook_url)
        secret = _new_secret() if created or regenerate_secret else None
        if row is None:
            row = TeamNotification(team=team)
        row.webhook_url = url
        if secret is not None:
            row.webhook_secret = crypto.encrypt(secret)
        row.updated_by = acting_user(by)
        row.save()
        audit_record(
            actor=by, kind="notification.set", team=team, target=url_host(url),
            data={"before_host": before, "secret_generated": secret is not None},
        )  # fmt: skip
    if secret is not None:
        secret_values.remember({_SECRET_LABEL: secret})
    return NotificationInfo(url=row.webhook_url, updated_at=row.updated_at, secret=secret)


def notification_clear(*, by, team: Team) -> None:
    """Stop notifying; the secret goes with the URL, so setting one again makes a new one."""
    _require_admin(by, team)
    with transaction.atomic():
        row = TeamNotification.objects.select_for_update().filter(team=team).first()
        if row is None:
            raise NotFound("the team has no notification webhook.")
        host = url_host(row.webhook_url)
        row.delete()
        audit_record(actor=by, kind="notification.cleared", team=team, target=host)


def notification_configured(team_id: int) -> bool:
    """One indexed read; lets callers skip everything for the many teams without a webhook."""
    return TeamNotification.objects.filter(team_id=team_id).exists()


def webhook_target_for_team(team_id: int) -> WebhookTarget | None:
    """The URL and the decrypted signing secret, or None when the team has no webhook.
    Raises crypto.SecretDecryptionError when the configured keys cannot open the secret."""
    row = (
        TeamNotification.objects.filter(team_id=team_id)
        .values_list("webhook_url", "webhook_secret")
        .first()
    )
    if row is None:
        return None
    url, token = row
    secret = crypto.decrypt(token, name=_SECRET_LABEL, team_id=team_id)
    secret_values.remember({_SECRET_LABEL: secret})
    return WebhookTarget(url=url, secret=secret)


def notification_secrets_rotate() -> int:
    """Re-encrypt every webhook signing secret with the first key (manage.py rotate_secrets);
    compare-and-set per row like teams.secrets.secrets_rotate. Returns how many changed."""
    rotated = 0
    for pk, team_id, token in TeamNotification.objects.values_list(
        "pk", "team_id", "webhook_secret"
    ):
        fresh = crypto.reencrypt(token, name=_SECRET_LABEL, team_id=team_id)
        rotated += TeamNotification.objects.filter(pk=pk, webhook_secret=token).update(
            webhook_secret=fresh
        )
    return rotated
