"""The per-process history cache stays bounded by conversations and by cached events, and
reads the same whether the log arrives in pieces or whole."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from conversations.events import (
    ActionEvent,
    CondensationEvent,
    ObservationEvent,
    SystemPromptEvent,
    Usage,
    UserMessageBlockedEvent,
    UserMessageEvent,
)
from conversations.store import StoredEvent
from conversations.view import llm_view
from orchestration.step import history
from orchestration.step.context_size import event_tokens
from orchestration.step.messages import messages_from_events


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


def test_a_history_read_in_pieces_equals_one_read_whole(monkeypatch):
    """A runner's cache (its own appends, one by one) and a cold worker's read (the whole log
    at once) agree on the View, the messages and the running estimates, across condensations
    and a blocked message."""
    system = SystemPromptEvent(content="be useful")
    task = UserMessageEvent(text="the task")
    log: list = [system, task]
    for n in range(6):
        usage = Usage(prompt_tokens=100 * n + 50, completion_tokens=5)
        action = ActionEvent(tool_call_id=f"c{n}", tool="t", arguments="{}",
                             llm_response_id=f"r{n}", usage=usage)  # fmt: skip
        log += [action, ObservationEvent(tool_call_id=f"c{n}", tool="t", content="x" * 40 * n)]
        if n == 2:
            log.append(CondensationEvent(forgotten_ids=[e.id for e in log[2:6]], summary="s1",
                                         offset=2))  # fmt: skip
        if n == 3:
            blocked = UserMessageEvent(text="no")
            log += [blocked, UserMessageBlockedEvent(message_id=blocked.id, hook="h")]
        if n == 4:
            log.append(CondensationEvent(forgotten_ids=[e.id for e in log[6:10]], summary="s2",
                                         offset=2))  # fmt: skip
    stored = [
        StoredEvent(seq=i + 1, created_at=datetime.now(UTC), event=e) for i, e in enumerate(log)
    ]
    monkeypatch.setattr(history.store, "load", lambda _id, *, after_seq=0, limit=None: [
        s for s in stored if s.seq > after_seq
    ])  # fmt: skip
    whole = history.History()
    whole.extend(stored, "c")
    pieces = history.History()
    for one in stored:
        pieces.extend([one], "c")
        assert pieces.view_tokens == sum(event_tokens(e) for e in pieces.view)
    assert pieces.view == whole.view == llm_view(log)
    assert [e.type for e in whole.view][:3] == ["system.prompt", "message.user", "condensation"]
    assert pieces.messages == whole.messages == messages_from_events(whole.view)
    assert (pieces.view_tokens, pieces.last_prompt_tokens) == (
        whole.view_tokens, whole.last_prompt_tokens,
    )  # fmt: skip
    assert whole.last_prompt_tokens == 555  # the latest response after the last condensation
