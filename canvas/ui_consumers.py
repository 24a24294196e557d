"""The conversation page's live feed: rendered HTML fragments for the htmx ws extension.

Protocol: the page is server-rendered with every event up to some seq N. After the socket
opens (and after every reconnect) the page sends `{"resume": N}` with the last seq it shows;
the consumer then sends each later event once and in order, as a fragment that appends the
row to `#events` out of band, plus header updates (status badge, pause button, stats). Nothing
is sent before the first resume, so a reconnecting page never gets a gap or a duplicate.

Approval cards follow the log: an `action.decision` row also turns its card into "approved /
rejected by X" (same frame, out of band), and after a status change the header frame carries
the whole `#approvals` section re-rendered from the pending actions as they are now.

The Agents section (`#agent-tree`) is re-read and sent whole, out of band, when the runner
hints that a descendant changed (broadcast.TREE_MESSAGE_TYPE), after relaying a spawn or a
settlement of this conversation's own children, and by the safety poll while some node may
still change; at most once per TREE_RENDER_SECONDS however many hints arrive, always with a
render after the last one, and only when it looks different from the last one sent.

An external agent's live text (broadcast.DELTA_MESSAGE_TYPE) is relayed as it comes, without
a read: the first delta of a key appends a bubble to `#live-stream`, each later one appends
its text to that bubble, and the stored event that completes the key (a message, a thought, a
tool result) deletes the bubble in the frame that appends its row; the end of the turn
(acp.turn) deletes any left. Deltas are not resumed: a page that reconnects drops its
bubbles (conversation.js) and the log says the rest.

Access is decided at connect and re-checked when it may have changed (canvas.access_signals,
and a timer), not per message: resuming reads the log after the page's seq, plus the row's
stats once if the events replayed changed them, plus the pending actions only when the
conversation is left waiting for a decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import replace
from typing import Any

from channels.db import database_sync_to_async
from django.template.loader import render_to_string

from common.errors import Forbidden, NotFound
from conversations import store
from conversations.events import (
    AcpTurnEvent,
    AgentMessageEvent,
    AgentThoughtEvent,
    ObservationEvent,
    Status,
    StatusChangeEvent,
    SubagentsSettledEvent,
    SubagentsSpawnedEvent,
    event_tag,
)
from conversations.models import Conversation
from conversations.selectors import run_start_seq
from orchestration.control.approvals import pending_actions

from .access import Action, aconversation_for
from .agent_tree import aagent_tree_context
from .consumers import EventRelayConsumer
from .event_rows import (
    ApprovalCard,
    EventRow,
    approval_card,
    call_key,
    event_row,
    event_row_from_record,
)
from .stream import calls_in_flight, live_row, stop_note
from .ws_close import CloseCode

FRAGMENTS = "canvas/conversation_detail.html"
STATUS_CHANGED = event_tag(StatusChangeEvent)
STATS_FIELDS = ("steps", "tokens_in", "tokens_out", "cost_usd", "created_at", "closed_at")
"""What the `#stats` fragment shows, and whether the conversation is closed (the controls):
the only columns a header refresh reads."""
TREE_CHANGED = frozenset({event_tag(SubagentsSpawnedEvent), event_tag(SubagentsSettledEvent)})
"""Records of the conversation's own log after which its agent tree is re-read."""
TREE_RENDER_SECONDS = 0.5
"""The least time between two reads of the agent tree on one socket: a parent with many
busy children is hinted at on every child's step."""
LIVE_KINDS = frozenset({"message", "thought", "tool"})
TURN_ENDED = event_tag(AcpTurnEvent)
LIVE_ENDS = {
    event_tag(AgentMessageEvent): ("message", "llm_response_id"),
    event_tag(AgentThoughtEvent): ("thought", "message_id"),
    event_tag(ObservationEvent): ("tool", "tool_call_id"),
}
"""The stored event that completes a live key: its tag -> (delta kind, the field holding the key)."""
MAX_LIVE_BUBBLES = 64
"""Keys one socket tracks at once; an agent never streams this many without finishing one."""


def live_id(kind: str, key: str) -> str:
    """A live bubble's DOM id part: the kind too, since a thought and a message may share an
    ACP message id."""
    return f"{kind}-{call_key(key)}"


def _live_end(record: dict[str, Any]) -> str | None:
    end = LIVE_ENDS.get(record.get("type", ""))
    key = record.get(end[1]) if end else None
    return live_id(end[0], key) if end and isinstance(key, str) and key else None


def _wants_header_refresh(record: dict[str, Any]) -> bool:
    return record.get("type") == STATUS_CHANGED or bool(record.get("usage"))


@database_sync_to_async
def _calls_in_flight(conversation_id: str, seq: int) -> list[EventRow]:
    """The calls of the run that were still running just before `seq`: read once per pause."""
    after = run_start_seq(conversation_id, before_seq=seq)
    events = store.load(conversation_id, after_seq=after, limit=max(seq - after - 1, 0))
    return calls_in_flight([event_row(e.seq, e.event) for e in events])


@database_sync_to_async
def _pending_cards(conversation_id: str) -> list[ApprovalCard]:
    return [approval_card(p) for p in pending_actions(conversation_id)]


class ConversationPageConsumer(EventRelayConsumer):
    """/ws/ui/conversations/{id}/ — HTML fragments, resumed by the page's last seq."""

    can_act = False
    external = False
    """An external agent's conversation: Interrupt stops it while it waits for a person."""
    header_due = False
    """The records sent since the last header frame changed the stats or the status."""
    status_sent: str | None = None
    """The last status those records set, if any: the approval cards follow it."""
    late_calls: set[str] = frozenset()  # type: ignore[assignment]
    """Keys of calls a pause sent on this socket found running: their results say so."""
    tree_due = False
    """The tree may have changed since it was last sent: a hint, a spawn or a settlement."""
    tree_live = True
    """Some node of the tree last read may still change, so the safety poll re-reads it;
    unknown before the first read, so the first poll looks once."""
    tree_sent = ""
    """The last `#agent-tree` sent; an identical read is not sent again."""
    _tree_waiting = False
    _tree_read_at = float("-inf")

    async def connect(self) -> None:
        self._tree_tasks: set[asyncio.Task] = set()
        self.live_open: dict[str, None] = {}
        """The bubbles this socket has drawn and not yet deleted, oldest first."""
        if not await self.authorize():
            return
        self.can_act = await self._allowed(Action.ACT)
        self.external = (
            await Conversation.objects.filter(pk=self.conversation_id).exclude(agent="").aexists()
        )
        await self.accept()
        # Subscribe now; hints are ignored (last_seq is None) until the page says where it is.
        await self.channel_layer.group_add(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            resume = json.loads(text_data or "")["resume"]
            if isinstance(resume, bool) or not isinstance(resume, int) or resume < 0:
                raise ValueError(resume)
        except (ValueError, TypeError, KeyError):
            await self.close(code=CloseCode.BAD_REQUEST)
            return
        self.last_seq = resume
        await self.catch_up()
        self.start_safety_poll()

    def _context(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id, "can_act": self.can_act, "oob": True,
            "external": self.external,
        }  # fmt: skip

    async def send_records(self, records: list[dict[str, Any]]) -> None:
        context = self._context()
        for record in records:
            row = live_row(event_row_from_record(record), self.late_calls)
            if row.kind == "status-changed":
                row = await self._with_stop_note(row)
                status = row.event.status.value  # type: ignore[union-attr]
                context |= {"status": status, "status_label": row.status_label}
                self.status_sent = status
            html = render_to_string(f"{FRAGMENTS}#event-frame", {**context, "row": row})
            for ended in self._live_ended(record):
                html += render_to_string(f"{FRAGMENTS}#live-end", {"live_id": ended})
            await self.send(text_data=html)
        self.header_due = self.header_due or any(_wants_header_refresh(r) for r in records)
        self.tree_due = self.tree_due or any(r.get("type") in TREE_CHANGED for r in records)

    def _live_ended(self, record: dict[str, Any]) -> list[str]:
        """The open bubbles this stored record replaces: its own key's, or at the end of a
        turn every one left (a worker that died mid-stream never completes them)."""
        if record.get("type") == TURN_ENDED:
            ended, self.live_open = list(self.live_open), {}
            return ended
        key = _live_end(record)
        if key is None or key not in self.live_open:
            return []
        del self.live_open[key]
        return [key]

    async def _with_stop_note(self, row: EventRow) -> EventRow:
        """A pause or interrupt says what it left running (one log read, only for pauses)."""
        event = row.event
        if not isinstance(event, StatusChangeEvent) or event.status != Status.PAUSED:
            return row
        if not event.reason:  # not a person's pause (nothing to say it with)
            return row
        in_flight = await _calls_in_flight(self.conversation_id, row.seq)
        note = stop_note(event, in_flight)
        if note:
            self.late_calls = {*self.late_calls, *(r.call_key for r in in_flight)}
        return replace(row, note=note)

    async def relayed(self) -> None:
        if self.tree_due:
            self.schedule_tree()
        if not self.header_due or self.closing:
            return
        status, self.header_due, self.status_sent = self.status_sent, False, None
        conversation = await (
            Conversation.objects.filter(pk=self.conversation_id).only(*STATS_FIELDS).afirst()
        )
        if conversation is None:  # deleted while the page was open
            await self.close_for(CloseCode.NOT_FOUND)
            return
        context = self._context()
        html = render_to_string(f"{FRAGMENTS}#stats", {**context, "conversation": conversation})
        if status is not None:
            # The controls again, now knowing whether it is closed (a closed one offers no
            # Resume): the row frames drew them from the event alone.
            html += render_to_string(
                f"{FRAGMENTS}#controls",
                {**context, "status": status, "closed_at": conversation.closed_at},
            )
            # Only a conversation left waiting has cards; any other status clears them.
            waiting = status == Status.WAITING_FOR_CONFIRMATION
            cards = await _pending_cards(self.conversation_id) if waiting else []
            html += render_to_string(f"{FRAGMENTS}#approvals", {**context, "cards": cards})
        await self.send(text_data=html)

    async def conversation_delta(self, message: dict[str, Any]) -> None:
        """broadcast.DELTA_MESSAGE_TYPE: new text of a message, thought or tool call."""
        kind, key, text = message.get("kind"), message.get("key"), message.get("text")
        if self.last_seq is None or self.closing or kind not in LIVE_KINDS:
            return
        if not isinstance(key, str) or not key or not isinstance(text, str) or not text:
            return
        target = live_id(kind, key)
        context = {"live_id": target, "text": text}
        if target in self.live_open:
            await self.send(text_data=render_to_string(f"{FRAGMENTS}#live-append", context))
            return
        html = ""
        if len(self.live_open) >= MAX_LIVE_BUBBLES:  # a stale bubble: its event never came
            oldest = next(iter(self.live_open))
            del self.live_open[oldest]
            html = render_to_string(f"{FRAGMENTS}#live-end", {"live_id": oldest})
        self.live_open[target] = None
        title = message.get("title") if isinstance(message.get("title"), str) else ""
        context |= {"kind": kind, "key": key, "call_key": call_key(key), "title": title}
        html += render_to_string(f"{FRAGMENTS}#live-start", context)
        await self.send(text_data=html)

    async def conversation_tree(self, message: dict[str, Any]) -> None:
        """broadcast.TREE_MESSAGE_TYPE: a descendant's status or steps changed."""
        self.tree_due = True
        self.schedule_tree()

    async def polled(self) -> None:
        if self.tree_live:
            self.tree_due = True
            self.schedule_tree()

    def schedule_tree(self) -> None:
        """Read and send the tree soon: now, or TREE_RENDER_SECONDS after the last read. A
        read still waiting covers this call; one already reading does not (it may have read
        before the change committed), so this call gets a read of its own after it."""
        if self.closing or self.last_seq is None:  # before resume: sent once resumed
            return
        if self._tree_waiting:
            return
        self.tree_due, self._tree_waiting = False, True
        wait = self._tree_read_at + TREE_RENDER_SECONDS - asyncio.get_running_loop().time()
        self._tree_tasks.add(task := asyncio.create_task(self._send_tree(max(wait, 0.0))))
        task.add_done_callback(self._tree_tasks.discard)

    async def _send_tree(self, wait: float) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            if wait:
                await asyncio.sleep(wait)
            self._tree_read_at = asyncio.get_running_loop().time()
            self._tree_waiting = False  # a hint from now on may be newer than this read
            tree = await aagent_tree_context(self.conversation_id)
            self.tree_live = tree["agent_tree_live"]
            if not tree["agent_tree"] and not self.tree_sent:
                return  # no sub-agents yet: the page's hidden section is still right
            html = render_to_string(f"{FRAGMENTS}#agent-tree", {**self._context(), **tree})
            if html != self.tree_sent and not self.closing:
                self.tree_sent = html
                await self.send(text_data=html)

    async def disconnect(self, code: int) -> None:
        for task in list(getattr(self, "_tree_tasks", ())):
            task.cancel()
        await super().disconnect(code)

    async def access_kept(self) -> None:
        # A member made viewer (or back) gets the matching controls with the next frame.
        self.can_act = await self._allowed(Action.ACT)

    async def _allowed(self, action: Action) -> bool:
        try:
            await aconversation_for(self.scope.get("user"), self.conversation_id, action)
        except (NotFound, Forbidden):  # a viewer may watch but not act
            return False
        return True
