"""The API edge's own rows: Idempotency-Keys and the answers they got (canvas.api.idempotency).

They belong to the HTTP API, not to any domain app: a key names one request of one person,
whatever that request does."""

from __future__ import annotations

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models


class IdempotencyKey(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)
    """sha256 of the request's method, path and JSON body: what the key was first used for."""
    status = models.PositiveSmallIntegerField(null=True)
    body = models.JSONField(null=True, encoder=DjangoJSONEncoder)
    """The first answer, replayed to retries. Written in the transaction of the request's own
    writes, so no committed key lacks its answer."""
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_per_user"),
        ]

    def __str__(self) -> str:
        return f"{self.user_id}:{self.key}"
