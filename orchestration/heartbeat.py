"""The lease heartbeat: renews a running slice's lease and watches for an Interrupt."""

from __future__ import annotations

import threading
import time

from django.conf import settings
from django.db import connection
from django.utils import timezone

from conversations.models import Conversation

from .lease import lease_ttl


class Heartbeat:
    """Renews the lease in the background so a long tool call does not lose it, and watches
    for an Interrupt so the LLM call or command in flight can be abandoned within a second."""

    POLL_SECONDS = 0.25

    def __init__(self, conversation_id: str, token: str) -> None:
        self.conversation_id = conversation_id
        self.token = token
        self.lost = threading.Event()
        self.cancel = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-heartbeat", daemon=True)

    def _run(self) -> None:
        interval = max(0.2, settings.CANVAS_LEASE_SECONDS / 3)
        renew_at = time.monotonic() + interval
        rows = Conversation.objects.filter(pk=self.conversation_id)
        try:
            while not self._stop.wait(self.POLL_SECONDS):
                if rows.values_list("interrupt_requested_at", flat=True).first() is not None:
                    self.cancel.set()
                if time.monotonic() < renew_at:
                    continue
                renew_at = time.monotonic() + interval
                renewed = rows.filter(lease_token=self.token).update(
                    lease_expires_at=timezone.now() + lease_ttl()
                )
                if not renewed:
                    self.lost.set()
                    self.cancel.set()
                    return
        finally:
            connection.close()

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
