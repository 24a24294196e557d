"""Managing automations: create, change, delete, rotate the webhook secret.

Admins and owners write (the API asks teams.services.team_get_for for Action.ADMINISTER;
these check again, as teams.hooks does). Every write is audited in its own transaction with
the fields before and after, never the secret. The webhook secret is made here, stored
Fernet-encrypted (teams.crypto, the same keys as team secrets) and returned only by the call
that made it.

A schedule starts afresh whenever it is changed in a way that makes its past slots mean
something else (cron, time zone, trigger) or that ends a pause (enabled again): its
`last_slot_at` becomes now, so `missed: once` never fires for slots from before the change
or from while it was disabled (automations.schedules).
"""

from __future__ import annotations

import secrets
from collections.abc import Collection
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from common import secret_values
from common.errors import Conflict, InvalidInput, NotFound
from teams import crypto
from teams.audit import audit_record
from teams.models import Team
from teams.permissions import acting_user, require_admin

from . import fields as f
from .models import Automation
from .vocabulary import Concurrency

RESTARTS_SCHEDULE = frozenset({"cron", "timezone", "trigger", "enabled"})
"""Fields whose change starts the schedule afresh from now (see the module's docstring)."""

SECRET_LABEL = "AUTOMATION_WEBHOOK_SECRET"
"""The name the logging filter knows a decrypted webhook secret by."""


@dataclass(frozen=True, slots=True)
class WithSecret:
    """An automation and its new webhook secret: the one answer that may show it."""

    automation: Automation
    secret: str


_require_admin = partial(require_admin, what="manage automations")


def _new_secret() -> str:
    secret = secrets.token_urlsafe(32)
    secret_values.remember({SECRET_LABEL: secret})
    return secret


def describe(automation: Automation) -> dict[str, Any]:
    """The fields as the audit log keeps them (no secret)."""
    data = {key: getattr(automation, key) for key in f.FIELDS}
    if isinstance(data["max_cost_usd"], Decimal):
        data["max_cost_usd"] = str(data["max_cost_usd"])
    return data


def _check_whole(automation: Automation, *, held_secrets: Collection[str] = ()) -> None:
    """The checks that need the whole automation or its team; `held_secrets`: the names it
    allowed before this change (see fields.check_secrets)."""
    values = {key: getattr(automation, key) for key in f.FIELDS}
    f.check_trigger(values)
    f.check_secrets(team=automation.team, names=automation.allowed_secrets, held=held_secrets)
    f.check_agent(
        team=automation.team, model=automation.model, agent=automation.agent,
        workspace_spec=automation.workspace_spec,
    )  # fmt: skip
    f.check_limits(team=automation.team, agent=automation.agent, limits=automation.limits)


def _save(automation: Automation) -> None:
    try:
        with transaction.atomic():
            automation.save()
    except IntegrityError:
        raise Conflict(f"the team already has an automation named {automation.name!r}.") from None


def automation_create(*, by, team: Team, **given: Any) -> WithSecret:
    """A new automation from FIELDS (name, trigger and prompt_template required; model
    defaults to the site's CANVAS_DEFAULT_MODEL, concurrency and missed to skip). A schedule
    fires no slot from before its creation (automations.schedules starts at created_at)."""
    _require_admin(by, team)
    for required in ("name", "trigger", "prompt_template"):
        if given.get(required) is None:
            raise InvalidInput(f"{required} is required.")
    values = {key: f.clean_one(key, value) for key, value in given.items() if value is not None}
    values.setdefault("concurrency", Concurrency.SKIP.value)
    values["model"] = values.get("model") or settings.CANVAS_DEFAULT_MODEL
    values["timezone"] = values.get("timezone") or "UTC"
    secret = _new_secret()
    automation = Automation(
        team=team, webhook_secret=crypto.encrypt(secret), created_by=acting_user(by),
        updated_by=acting_user(by), **values,
    )  # fmt: skip
    _check_whole(automation)
    with transaction.atomic():
        _save(automation)
        audit_record(
            actor=by, kind="automation.created", team=team, target=automation.name,
            data=describe(automation),
        )  # fmt: skip
    return WithSecret(automation, secret)


def _locked(team: Team, automation_id: int) -> Automation:
    automation = Automation.objects.select_for_update().filter(team=team, pk=automation_id).first()
    if automation is None:
        raise NotFound("no such automation.")
    return automation


def automation_update(*, by, team: Team, automation_id: int, **given: Any) -> Automation:
    """Change some FIELDS; one left out or None keeps its value (send "" to clear a text)."""
    _require_admin(by, team)
    cleaned = {key: f.clean_one(key, value) for key, value in given.items() if value is not None}
    if "model" in cleaned and not cleaned["model"]:
        cleaned["model"] = settings.CANVAS_DEFAULT_MODEL
    with transaction.atomic():
        automation = _locked(team, automation_id)
        before = describe(automation)
        for key, value in cleaned.items():
            setattr(automation, key, value)
        if any(before[key] != getattr(automation, key) for key in RESTARTS_SCHEDULE):
            automation.last_slot_at = timezone.now()
        automation.updated_by = acting_user(by)
        _check_whole(automation, held_secrets=before["allowed_secrets"])
        _save(automation)
        audit_record(
            actor=by, kind="automation.updated", team=team, target=automation.name,
            data={"before": before, "after": describe(automation)},
        )  # fmt: skip
    return automation


def automation_delete(*, by, team: Team, automation_id: int) -> None:
    """Delete it and its run history; the conversations its runs started stay."""
    _require_admin(by, team)
    with transaction.atomic():
        automation = _locked(team, automation_id)
        data = describe(automation)
        automation.delete()
        audit_record(actor=by, kind="automation.deleted", team=team, target=data["name"], data=data)


def automation_rotate_secret(*, by, team: Team, automation_id: int) -> WithSecret:
    """A new webhook secret; deliveries signed with the old one are refused from now on."""
    _require_admin(by, team)
    secret = _new_secret()
    with transaction.atomic():
        automation = _locked(team, automation_id)
        automation.webhook_secret = crypto.encrypt(secret)
        automation.updated_by = acting_user(by)
        automation.save(update_fields=["webhook_secret", "updated_by", "updated_at"])
        audit_record(actor=by, kind="automation.secret_rotated", team=team, target=automation.name)
    return WithSecret(automation, secret)


def webhook_secret_of(automation: Automation) -> str:
    """The decrypted secret, for checking a signature only: never log or return it. Raises
    teams.crypto.SecretDecryptionError when the configured keys cannot open it."""
    secret = crypto.decrypt(
        automation.webhook_secret, name=SECRET_LABEL, team_id=automation.team_id
    )
    secret_values.remember({SECRET_LABEL: secret})
    return secret
