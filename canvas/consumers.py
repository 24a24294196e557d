"""Websocket relays of a conversation's events.

The channel layer only hints that events were committed; the log in the database is the
truth. A consumer subscribes first, then reads what it missed, then forwards hints, always by
seq: each event reaches the client once and in order, including events appended while the
client's history was being replayed. Live deltas (an external agent's text as it streams)
carry no seq and are sent as they come, never replayed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from common.errors import NotFound
from conversations import store
from conversations.broadcast import conversation_group
from conversations.models import Conversation

from .access import Action, aconversation_for, conversation_for
from .access_signals import user_access_group
from .ws_auth import current_user
from .ws_close import CloseCode
from .ws_origin import origin_allowed

CATCH_UP_PAGE = 500
DELTA_FIELDS = ("kind", "key", "text", "title")
"""What a JSON client gets of a broadcast delta."""
SAFETY_POLL_SECONDS = settings.CANVAS_SAFETY_POLL_SECONDS
"""How often an idle socket checks the log itself, in case the hint for the last event of a
burst was lost (the channel layer is at-most-once)."""
ACCESS_RECHECK_SECONDS = 60.0
"""How often an open socket re-checks its access without being told (canvas.access_signals
tells it within a second); bounds how long a lost hint or an expired token keeps it open."""


class EventRelayConsumer(AsyncWebsocketConsumer):
    """Shared relay logic; subclasses decide how records are sent."""

    last_seq: int | None = None
    conversation_id: str | None = None
    access_group: str | None = None
    closing = False
    _poller: asyncio.Task | None = None

    @property
    def _relay_lock(self) -> asyncio.Lock:
        # Hints and the safety poll both forward records; one at a time keeps seqs in order.
        if not hasattr(self, "_lock"):
            self._lock = asyncio.Lock()
        return self._lock

    async def authorize(self) -> bool:
        if self.scope.get("auth_throttled"):
            await self.close(code=CloseCode.THROTTLED)
            return False
        if not origin_allowed(self.scope):
            await self.close(code=CloseCode.FORBIDDEN_ORIGIN)
            return False
        user = self.scope.get("user")
        if user is not None and user.is_authenticated:
            # Joined before the check below, so a change committed after it is not missed.
            self.access_group = user_access_group(user.pk)
            await self.channel_layer.group_add(self.access_group, self.channel_name)
        try:
            conversation = await aconversation_for(
                user, self.scope["url_route"]["kwargs"]["conversation_id"], Action.VIEW
            )
        except NotFound:
            await self.close(code=CloseCode.NOT_FOUND)
            return False
        self.conversation_id = str(conversation.pk)
        self.group = conversation_group(conversation.pk)
        return True

    async def disconnect(self, code: int) -> None:
        if self._poller is not None:
            self._poller.cancel()
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)
        if self.access_group is not None:
            await self.channel_layer.group_discard(self.access_group, self.channel_name)

    async def access_changed(self, message: dict[str, Any]) -> None:
        """canvas.access_signals: something that decides this user's access changed."""
        await self.recheck_access()

    async def recheck_access(self) -> bool:
        """Close the socket (and stop relaying at once) when the credentials it opened with or
        its access to the conversation are gone; True while both still hold."""
        if self.closing or self.conversation_id is None:
            return False
        refusal, user = await self._access_now()
        if refusal is not None:
            await self.close_for(refusal)
            return False
        self.scope["user"] = user  # the fresh row: roles and flags as they are now
        await self.access_kept()
        return True

    @database_sync_to_async
    def _access_now(self) -> tuple[CloseCode | None, Any]:
        # One trip to the database thread: the re-check should close within a second even
        # when many sockets re-check at once.
        user = current_user(self.scope)
        if user is None:
            return CloseCode.CREDENTIALS_GONE, None
        try:
            conversation_for(user, self.conversation_id, Action.VIEW)
        except NotFound:
            return CloseCode.NOT_FOUND, None
        return None, user

    async def access_kept(self) -> None:
        """Called after a re-check that keeps the socket open (a role may have changed)."""

    async def polled(self) -> None:
        """Called by the safety poll after each of its log checks, once the client has said
        where it is: what else a lost hint could leave stale is re-read here."""

    async def close_for(self, code: CloseCode) -> None:
        self.closing = True  # _forward sends nothing more, even before the server says closed
        await self.close(code=code)
        if self._poller is not None and self._poller is not asyncio.current_task():
            self._poller.cancel()

    def start_safety_poll(self) -> None:
        if self._poller is None:
            self._poller = asyncio.create_task(self._safety_poll())

    async def _safety_poll(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            loop = asyncio.get_running_loop()
            recheck_at = loop.time() + ACCESS_RECHECK_SECONDS
            while not self.closing:
                await asyncio.sleep(SAFETY_POLL_SECONDS)
                if loop.time() >= recheck_at:
                    recheck_at = loop.time() + ACCESS_RECHECK_SECONDS
                    if not await self.recheck_access():
                        return
                if self.last_seq is None:
                    continue
                last = await (
                    Conversation.objects.filter(pk=self.conversation_id)
                    .values_list("last_seq", flat=True)
                    .afirst()
                )
                if last is not None and last > self.last_seq:
                    await self.catch_up()
                await self.polled()

    async def catch_up(self) -> None:
        async with self._relay_lock:
            await self._catch_up_locked()
            await self.relayed()

    async def _catch_up_locked(self) -> None:
        assert self.last_seq is not None
        while not self.closing:
            page = await store.aload(
                self.conversation_id, after_seq=self.last_seq, limit=CATCH_UP_PAGE
            )
            if page:
                await self._forward([e.as_record() for e in page])
            if len(page) < CATCH_UP_PAGE:
                return

    async def conversation_events(self, message: dict[str, Any]) -> None:
        """A hint from the channel layer: forward inline records, or read the gap."""
        if self.last_seq is None or self.closing:
            return
        async with self._relay_lock:
            records = message.get("records")
            if records and records[0]["seq"] <= self.last_seq + 1:
                await self._forward(records)
            elif message.get("last_seq", 0) > self.last_seq:
                await self._catch_up_locked()
            await self.relayed()

    async def _forward(self, records: list[dict[str, Any]]) -> None:
        """Send records after last_seq; call with the relay lock held."""
        assert self.last_seq is not None
        if self.closing:
            return
        fresh = [r for r in records if r["seq"] > self.last_seq]
        if not fresh:
            return
        if fresh[0]["seq"] != self.last_seq + 1:  # a gap: the log fills it, in order
            await self._catch_up_locked()
            return
        await self.send_records(fresh)
        self.last_seq = fresh[-1]["seq"]

    async def send_records(self, records: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    async def conversation_delta(self, message: dict[str, Any]) -> None:
        """broadcast.DELTA_MESSAGE_TYPE: an external agent's live text. Ignored unless a
        subclass shows it; Channels closes a consumer that has no handler for a message."""

    async def relayed(self) -> None:
        """Called with the relay lock held once a catch-up or a hint is relayed, however many
        pages it took: what sums up the records just sent (a header) is sent once, here."""


class EventStreamConsumer(EventRelayConsumer):
    """JSON: /ws/conversations/{id}/events?after_seq=N — one text frame per event."""

    async def connect(self) -> None:
        if not await self.authorize():
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            after_seq = max(0, int(query.get("after_seq", ["0"])[0]))
        except ValueError:
            await self.close(code=CloseCode.BAD_REQUEST)
            return
        await self.accept()
        await self.channel_layer.group_add(self.group, self.channel_name)
        self.last_seq = after_seq
        await self.catch_up()
        self.start_safety_poll()

    async def send_records(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            await self.send(text_data=json.dumps(record))

    async def conversation_delta(self, message: dict[str, Any]) -> None:
        """Live text as `{"type": "delta", kind, key, text, title}`: no seq, never resumed;
        the stored event for `key` follows with the whole text."""
        if self.last_seq is None or self.closing:
            return
        fields = {name: message.get(name, "") for name in DELTA_FIELDS}
        await self.send(text_data=json.dumps({"type": "delta", **fields}))


class NoRouteConsumer(AsyncWebsocketConsumer):
    """Any other websocket path: refused like an unknown conversation, not a 500."""

    async def connect(self) -> None:
        await self.close(code=CloseCode.NOT_FOUND)
