"""The per-process history cache stays bounded by conversations and by cached events."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from conversations.events import UserMessageEvent
from conversations.store import StoredEvent
from orchestration.step import history


@pytest.fixture
def logs(monkeypatch):
    """Fake logs, conversation id -> event count, read through `store.load`."""
    sizes: dict[str, int] = {}

    def load(conversation_id, *, after_seq=0, limit=None):
        return [
            StoredEvent(seq=seq, created_at=datetime.now(UTC), event=UserMessageEvent(text="hi"))
            for seq in range(after_seq + 1, sizes[conversation_id] + 1)
        ]

    monkeypatch.setattr(history.store, "load", load)
    monkeypatch.setattr(history, "_cache", type(history._cache)())
    return sizes


def test_the_cache_keeps_at_most_so_many_conversations(logs, monkeypatch):
    monkeypatch.setattr(history, "MAX_CACHED_CONVERSATIONS", 2)
    for name in "abc":
        logs[name] = 1
        history.history_refresh(name)
    assert list(history._cache) == ["b", "c"]


def test_the_cache_keeps_at_most_so_many_events(logs, monkeypatch):
    monkeypatch.setattr(history, "MAX_CACHED_EVENTS", 10)
    logs.update(a=4, b=4, c=4)
    for name in "abc":
        history.history_refresh(name)
    assert list(history._cache) == ["b", "c"]
    history.history_refresh("b")  # used again: the least recently refreshed goes first
    logs["d"] = 3
    history.history_refresh("d")
    assert list(history._cache) == ["b", "d"]


def test_a_conversation_over_the_budget_alone_stays_cached(logs, monkeypatch):
    monkeypatch.setattr(history, "MAX_CACHED_EVENTS", 10)
    logs.update(a=2, big=25)
    history.history_refresh("a")
    big = history.history_refresh("big")
    assert list(history._cache) == ["big"]
    logs["big"] = 26
    assert history.history_refresh("big") is big
    assert big.last_seq == 26
