"""A per-process cache of each conversation's View and chat messages.

The log is append-only, so a cached prefix is never wrong: a runner only reads the events
after the last seq it has seen. This keeps a step's framework cost flat as history grows,
whichever worker process runs the step.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from conversations import store
from conversations.events import AnyEvent, UserMessageBlockedEvent
from conversations.projections import RunState
from conversations.store import StoredEvent
from conversations.view import llm_view

from .messages import extend_messages

MAX_CACHED_CONVERSATIONS = 256
MAX_CACHED_EVENTS = 100_000
"""Events kept across all cached conversations (each keeps its whole log): least recently
refreshed conversations go first, but never the one just refreshed."""


@dataclass
class History:
    last_seq: int = 0
    events: list[AnyEvent] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    state: RunState = field(default_factory=RunState)

    def extend(self, stored: list[StoredEvent], conversation_id: str) -> None:
        """Add events just read or written; fills any gap (someone else appended) from the log."""
        stored = [s for s in stored if s.seq > self.last_seq]
        if not stored:
            return
        if stored[0].seq != self.last_seq + 1:
            stored = store.load(conversation_id, after_seq=self.last_seq)
        fresh = [s.event for s in stored]
        self.last_seq = stored[-1].seq
        self.events.extend(fresh)
        self.state.apply(fresh)
        if any(isinstance(e, UserMessageBlockedEvent) for e in fresh):
            # The block withdraws a message read earlier; rare enough to rebuild the whole View.
            self.messages.clear()
            extend_messages(self.messages, llm_view(self.events))
        else:
            extend_messages(self.messages, llm_view(fresh))


_cache: OrderedDict[str, History] = OrderedDict()
_lock = threading.Lock()


def history_refresh(conversation_id: str) -> History:
    """The conversation's history, brought up to date with the log."""
    with _lock:
        history = _cache.pop(conversation_id, None) or History()
        _cache[conversation_id] = history
    history.extend(store.load(conversation_id, after_seq=history.last_seq), conversation_id)
    with _lock:
        _evict()
    return history


def _evict() -> None:
    """Drop the least recently refreshed histories beyond the count or the event budget."""
    cached_events = sum(len(history.events) for history in _cache.values())
    while len(_cache) > 1 and (
        len(_cache) > MAX_CACHED_CONVERSATIONS or cached_events > MAX_CACHED_EVENTS
    ):
        _, evicted = _cache.popitem(last=False)
        cached_events -= len(evicted.events)
