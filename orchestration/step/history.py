"""A per-process cache of each conversation's log, View and chat messages.

The log is append-only, so a cached prefix is never wrong: a runner only reads the events
after the last seq it has seen. Once the log has been condensed, only its window is held
(conversations.window): a cold worker reads just that, and a warm one drops the rest at each
condensation, so a step's framework cost stays flat as history grows, whichever worker process
runs the step, and both derive the same View and state.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from conversations import store
from conversations.events import (
    AnyEvent,
    CondensationEvent,
    UserMessageBlockedEvent,
    is_llm_step,
)
from conversations.projections import RunState
from conversations.store import StoredEvent, WindowRead
from conversations.view import llm_view, view_extend
from conversations.window import Window

from .context_size import event_tokens
from .messages import extend_messages, messages_from_events

MAX_CACHED_CONVERSATIONS = 256
MAX_CACHED_EVENTS = 100_000
"""Events kept across all cached conversations (each keeps its window): least recently
refreshed conversations go first, but never the one just refreshed."""


@dataclass
class History:
    last_seq: int = 0
    events: list[AnyEvent] = field(default_factory=list)
    """The log, or its window once condensed."""
    seqs: list[int] = field(default_factory=list)
    """Each event's seq, in step with `events`."""
    window_from: int = 1
    """The window's first seq (conversations.window); 1 while the whole log is held."""
    view: list[AnyEvent] = field(default_factory=list)
    """The LLM's View (conversations.view): condensations applied, blocked messages gone."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    view_tokens: int = 0
    """Running estimate of the View's size (context_size.event_tokens summed over it)."""
    last_prompt_tokens: int = 0
    """The provider's count for the latest response since the last condensation (prompt plus
    answer): a check on the estimate, 0 when none."""
    state: RunState = field(default_factory=RunState)

    @classmethod
    def loaded(cls, read: WindowRead) -> History:
        """A history of what a cold reader got (store.load_window)."""
        history = cls()
        history._add(read.events)
        if read.counts is not None:
            recent = [
                e for e, seq in zip(history.events, history.seqs, strict=True)
                if seq >= history.window_from
            ]  # fmt: skip
            history.state = RunState.resumed(history.events, recent, read.counts)
            history.last_seq = max(history.last_seq, read.counts.last_seq)
        return history

    def extend(self, stored: list[StoredEvent], conversation_id: str) -> None:
        """Add events just read or written; fills any gap (someone else appended) from the log.

        Whether the log arrives in one piece (a cold worker) or many (a runner's appends), the
        View, messages, estimates and state come out the same: recovery relies on it."""
        stored = [s for s in stored if s.seq > self.last_seq]
        if not stored:
            return
        if stored[0].seq != self.last_seq + 1:
            stored = store.load(conversation_id, after_seq=self.last_seq)
        self._add(stored)

    def seq_of(self, event_id: str) -> int:
        """The seq of a held event (a condensation records where its View starts)."""
        for event, seq in zip(reversed(self.events), reversed(self.seqs), strict=True):
            if event.id == event_id:
                return seq
        raise KeyError(event_id)

    def _add(self, stored: list[StoredEvent]) -> None:
        if not stored:
            return
        fresh = [s.event for s in stored]
        self.last_seq = stored[-1].seq
        self.events.extend(fresh)
        self.seqs.extend(s.seq for s in stored)
        self.state.apply(fresh)
        self._note_usage(fresh)
        if any(isinstance(e, UserMessageBlockedEvent) for e in fresh):
            # The block withdraws a message read earlier; rare enough to rebuild the whole View.
            self._rebuild(llm_view(self.events))
        elif any(isinstance(e, CondensationEvent) for e in fresh):
            # Costs the View's size, which condensation keeps bounded, never the log's.
            self._rebuild(view_extend(self.view, fresh))
        else:
            added = llm_view(fresh)
            self.view.extend(added)
            extend_messages(self.messages, added)
            self.view_tokens += sum(event_tokens(e) for e in added)
        window = next((w for e in reversed(fresh) if (w := Window.of(e)) is not None), None)
        if window is not None:
            self._keep(window)

    def _keep(self, window: Window) -> None:
        """Drop what the window leaves out: nothing a runner reads is in it."""
        kept = window.keep(self.seqs, [e.type for e in self.events])
        if len(kept) != len(self.events):
            self.events = [self.events[i] for i in kept]
            self.seqs = [self.seqs[i] for i in kept]
        self.window_from = window.from_seq

    def _rebuild(self, view: list[AnyEvent]) -> None:
        # New lists: a model call abandoned mid-flight may still be reading the old ones.
        self.view = view
        self.messages = messages_from_events(view)
        self.view_tokens = sum(event_tokens(e) for e in view)

    def _note_usage(self, fresh: list[AnyEvent]) -> None:
        for event in fresh:
            if isinstance(event, CondensationEvent):
                self.last_prompt_tokens = 0  # it counted a View that is gone
            elif (
                is_llm_step(event)
                and (usage := getattr(event, "usage", None))
                and usage.prompt_tokens
            ):
                self.last_prompt_tokens = usage.prompt_tokens + usage.completion_tokens


_cache: OrderedDict[str, History] = OrderedDict()
_lock = threading.Lock()


def history_refresh(conversation_id: str) -> History:
    """The conversation's history, brought up to date with the log."""
    with _lock:
        history = _cache.pop(conversation_id, None) or History()
        _cache[conversation_id] = history
    if history.last_seq:
        history.extend(store.load(conversation_id, after_seq=history.last_seq), conversation_id)
    else:
        history = History.loaded(store.load_window(conversation_id))
        with _lock:
            _cache[conversation_id] = history
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
