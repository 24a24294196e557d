"""`Idempotency-Key` on the API's creating POSTs: a retry gets the first answer, and nothing
is done twice.

A key is the client's name for one request, per user. The first request with a key stores it
and its answer in the transaction of the request's own writes: both are committed, or neither.
A later request with that key, the same method and path and the same JSON body, within
KEY_TTL, gets the stored status and body back without running; a different request is refused
(KeyReused, a 422). Two requests racing with one key meet on the key's unique constraint: the
second waits for the first's transaction, then replays its answer (or runs, if the first
failed). Errors are not stored: they roll back with everything else, so a retry runs again.
Expired keys count as new, and each new key purges a batch of expired ones.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, transaction
from django.http import HttpRequest
from django.utils import timezone

from canvas.models import IdempotencyKey
from common.errors import ServiceError

HEADER = "Idempotency-Key"
MAX_KEY_CHARS = 255
KEY_TTL = timedelta(hours=24)
PURGE_BATCH = 100


class KeyReused(ServiceError):
    status = 422
    code = "idempotency_key_reused"


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    replayed: bool = False
    """True when this is the stored answer to an earlier request with the same key."""


def fingerprint(request: HttpRequest) -> str:
    """What a key stands for: the method, the path and the body (as JSON, so that spacing and
    key order do not matter)."""
    try:
        body = json.dumps(json.loads(request.body or b"null"), sort_keys=True)
    except ValueError:
        body = request.body.hex()
    return hashlib.sha256(f"{request.method} {request.path}\n{body}".encode()).hexdigest()


def answer_once(
    request: HttpRequest, key: str | None, run: Callable[[], tuple[int, Any]]
) -> Answer:
    """`run()` (status, JSON-ready body) once per `key` of the request's user; without a key,
    simply `run()`. Raises KeyReused for a key first used for another request."""
    if not key:
        return Answer(*run())
    asked = fingerprint(request)
    with transaction.atomic():
        record, new = _claim(request.user, key, asked)
        if not new:
            if record.fingerprint != asked:
                raise KeyReused(
                    f"this {HEADER} was used for a different request (another path or body) in"
                    f" the last {KEY_TTL.total_seconds() / 3600:g} hours; use a new key."
                )
            return Answer(record.status, record.body, replayed=True)
        status, body = run()
        # Stored as the client will read it (DjangoJSONEncoder, as the API renders), so a
        # replay renders the same bytes.
        record.status, record.body = status, json.loads(json.dumps(body, cls=DjangoJSONEncoder))
        record.save(update_fields=["fingerprint", "created_at", "status", "body"])
    purge_expired()
    return Answer(status, record.body)


def _claim(user: AbstractBaseUser, key: str, asked: str) -> tuple[IdempotencyKey, bool]:
    """The key's row, locked until the caller's transaction ends; True when this request is
    the one to run (the key is new, or expired)."""
    now = timezone.now()
    try:
        with transaction.atomic():  # a savepoint: a duplicate must not spoil the outer block
            # Blocks while another transaction holds an uncommitted insert of the same key.
            return IdempotencyKey.objects.create(
                user=user, key=key, fingerprint=asked, created_at=now
            ), True
    except IntegrityError:
        pass
    record = IdempotencyKey.objects.select_for_update().get(user=user, key=key)
    if record.created_at <= now - KEY_TTL:  # expired and not purged yet: a new request
        record.fingerprint, record.created_at = asked, now
        return record, True
    return record, False


def purge_expired(batch: int = PURGE_BATCH) -> int:
    """Delete up to `batch` expired keys. The age is checked again on delete, so a key that
    a request renewed meanwhile stays."""
    cutoff = timezone.now() - KEY_TTL
    ids = list(IdempotencyKey.objects.filter(created_at__lte=cutoff).values_list("pk")[:batch])
    if not ids:
        return 0
    expired = IdempotencyKey.objects.filter(pk__in=[pk for (pk,) in ids], created_at__lte=cutoff)
    return expired.delete()[0]
