"""Team secrets: named values stored encrypted, handed only to the commands that use them.

Writes are audited in the same transaction (name and what changed, never the value) and bump
`Team.secrets_version`, which is how caches of decrypted values elsewhere (the event log's
redactor) notice a change with one indexed read. Callers check the permission first (the API
asks teams.services.team_get_for for Action.ADMINISTER; the admin site its model permissions).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import F

from common import secret_values
from common.errors import Conflict, InvalidInput, NotFound

from . import crypto
from .audit import audit_record
from .models import Secret, Team
from .permissions import acting_user

NAME_PATTERN = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")
MAX_VALUE_BYTES = 64 * 1024
MAX_DESCRIPTION_CHARS = 500
_ROTATE_BATCH = 200


@dataclass(frozen=True, slots=True)
class SecretInfo:
    """What may be shown about a secret: everything but its value."""

    name: str
    description: str
    created_at: datetime
    updated_at: datetime
    updated_by: str | None


def validate_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidInput(
            "a secret name is an environment variable name: upper-case letters, digits and _, "
            "not starting with a digit, at most 64 characters (e.g. API_KEY)."
        )
    return name


def validate_value(value: str) -> str:
    # The messages never quote the value: errors end up in responses and logs.
    if not isinstance(value, str) or not value:
        raise InvalidInput("the secret value must not be empty.")
    if len(value.encode("utf-8")) > MAX_VALUE_BYTES:
        raise InvalidInput(f"the secret value must be at most {MAX_VALUE_BYTES} bytes.")
    if "\0" in value:  # secrets travel as environment variables, which cannot hold NUL
        raise InvalidInput("the secret value must not contain NUL characters.")
    return value


def _check_description(description: str) -> str:
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise InvalidInput(f"the description must be at most {MAX_DESCRIPTION_CHARS} characters.")
    return description


def _bump(team: Team) -> None:
    """Call inside the write's transaction, so the version moves exactly when the data does."""
    Team.objects.filter(pk=team.pk).update(secrets_version=F("secrets_version") + 1)


def secret_create(*, by, team: Team, name: str, value: str, description: str = "") -> Secret:
    validate_name(name)
    validate_value(value)
    description = _check_description(description or "")
    secret_values.remember({name: value})
    with transaction.atomic():
        try:
            with transaction.atomic():
                secret = Secret.objects.create(
                    team=team, name=name, description=description,
                    ciphertext=crypto.encrypt(value), updated_by=acting_user(by),
                )  # fmt: skip
        except IntegrityError:
            raise Conflict(f"the team already has a secret named {name}.") from None
        _bump(team)
        audit_record(actor=by, kind="secret.created", team=team, target=name)
    return secret


def secret_update(
    *, by, team: Team, name: str, value: str | None = None, description: str | None = None
) -> Secret:
    """Change the value, the description or both; None leaves that part as it is."""
    if value is None and description is None:
        raise InvalidInput("give a new value, a new description or both.")
    if value is not None:
        validate_value(value)
    if description is not None:
        _check_description(description)
    with transaction.atomic():
        secret = Secret.objects.select_for_update().filter(team=team, name=name).first()
        if secret is None:
            raise NotFound(f"no secret named {name}.")
        changed = []
        if value is not None:
            # Only once the secret exists: a value sent for no secret must not start
            # redacting this process's logs.
            secret_values.remember({name: value})
            secret.ciphertext = crypto.encrypt(value)
            changed.append("value")
        if description is not None and description != secret.description:
            secret.description = description
            changed.append("description")
        secret.updated_by = acting_user(by)
        secret.save()
        _bump(team)
        audit_record(
            actor=by, kind="secret.updated", team=team, target=name, data={"changed": changed}
        )
    return secret


def secret_delete(*, by, team: Team, name: str) -> None:
    with transaction.atomic():
        deleted, _ = Secret.objects.filter(team=team, name=name).delete()
        if not deleted:
            raise NotFound(f"no secret named {name}.")
        _bump(team)
        audit_record(actor=by, kind="secret.deleted", team=team, target=name)


def secret_list(team: Team) -> list[SecretInfo]:
    rows = (
        Secret.objects.filter(team=team)
        .select_related("updated_by")
        .only("name", "description", "created_at", "updated_at", "updated_by__username")
        .order_by("name")
    )
    return [
        SecretInfo(
            name=s.name,
            description=s.description,
            created_at=s.created_at,
            updated_at=s.updated_at,
            updated_by=s.updated_by.get_username() if s.updated_by else None,
        )
        for s in rows
    ]


def secrets_required(team: Team, wanted: Mapping[str, str]) -> None:
    """InvalidInput naming the first of `wanted` (secret name -> where a config names it, as
    "env TOKEN") the team has no secret by, so a config never refers to nothing when saved."""
    if not wanted:
        return
    have = set(Secret.objects.filter(team=team, name__in=wanted).values_list("name", flat=True))
    for name, where in wanted.items():
        if name not in have:
            raise InvalidInput(f"{where}: the team has no secret named {name!r}.")


def secret_values_for_team(team_id: int) -> dict[str, str]:
    """{NAME: value} of the team's secrets, decrypted. For workers and redaction only: never
    send the result to a client or log it. Raises crypto.SecretDecryptionError naming the
    first secret the configured keys cannot open."""
    rows = Secret.objects.filter(team_id=team_id).values_list("name", "ciphertext")
    values = {name: crypto.decrypt(token, name=name, team_id=team_id) for name, token in rows}
    secret_values.remember(values)
    return values


def secrets_rotate() -> int:
    """Re-encrypt every secret with the first configured key; returns how many were rewritten.

    Each row is swapped only if nobody changed it meanwhile (compare-and-set on the old
    ciphertext): a concurrent update already wrote it under the first key. Values do not
    change, so no version bump: cached plaintexts stay right.
    """
    rotated = 0
    last_pk = 0
    while True:
        batch = list(
            Secret.objects.filter(pk__gt=last_pk)
            .order_by("pk")
            .values_list("pk", "team_id", "name", "ciphertext")[:_ROTATE_BATCH]
        )
        if not batch:
            break
        for pk, team_id, name, token in batch:
            fresh = crypto.reencrypt(token, name=name, team_id=team_id)
            rotated += Secret.objects.filter(pk=pk, ciphertext=token).update(ciphertext=fresh)
        last_pk = batch[-1][0]
    if rotated:
        audit_record(actor=None, kind="secrets.rotated", data={"count": rotated})
    return rotated
