"""The per-process history cache stays bounded by conversations and by cached events, and
reads the same whether the log arrives in pieces or whole."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conversations.cuts import choose_cut
from conversations.events import (
    ActionEvent,
    AgentMessageEvent,
    CondensationEvent,
    ObservationEvent,
    RunStartedEvent,
    Status,
    StatusChangeEvent,
    SystemContextEvent,
    SystemPromptEvent,
    Usage,
    UserMessageBlockedEvent,
    UserMessageCheckedEvent,
    UserMessageEvent,
)
from conversations.projections import RunCounts, RunState
from conversations.store import StoredEvent, WindowRead
from conversations.view import llm_view
from conversations.window import Window
from orchestration.step import history
from orchestration.step.context import latest_context
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
    monkeypatch.setattr(history.store, "load_window", lambda pk: WindowRead(load(pk), None))
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


NOW = datetime.now(UTC)
STEP_COST = 0.0013


def condensation_of(warm: history.History) -> CondensationEvent | None:
    """What the condenser would append now: half the View's estimate kept."""
    view = warm.view
    sizes = [event_tokens(e) for e in view]
    cut = choose_cut(view, sizes, budget=sum(sizes) // 2)
    if cut is None:
        return None
    return CondensationEvent(
        forgotten_ids=[e.id for e in cut.forgotten], summary="so far", offset=cut.start,
        kept_head_seqs=[warm.seq_of(e.id) for e in cut.events[: cut.start]],
        kept_from_seq=(
            warm.seq_of(cut.kept_tail[0].id) if cut.kept_tail else warm.last_seq + 1
        ),
    )  # fmt: skip


def counts_of(log: list[StoredEvent]) -> RunCounts:
    """What the row mirrors (store.append keeps it; tests/conversations/test_store.py)."""
    state = RunState().apply(s.event for s in log)
    return RunCounts(log[-1].seq, state.status.value, state.run_steps, state.run_cost,
                     state.run_children)  # fmt: skip


def window_read(log: list[StoredEvent]) -> WindowRead:
    """What store.load_window returns for this log (checked against Postgres in test_store)."""
    window = next((w for s in reversed(log) if (w := Window.of(s.event))), None)
    if window is None:
        return WindowRead(list(log), None)
    kept = window.keep([s.seq for s in log], [s.event.type for s in log])
    return WindowRead([log[i] for i in kept], counts_of(log))


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_a_cold_read_of_the_window_is_the_warm_history(data):
    """Random runs (steps that cost, messages checked or blocked, new runs, their context and
    condensations as the condenser writes them): a cold worker that reads only the window and
    the row holds exactly what the warm cache holds, and the View is the whole log's."""
    log: list[StoredEvent] = []
    warm = history.History()

    def add(*events) -> None:
        stored = [StoredEvent(seq=len(log) + i + 1, created_at=NOW, event=e)
                  for i, e in enumerate(events)]  # fmt: skip
        log.extend(stored)
        warm.extend(stored, "c")

    add(SystemPromptEvent(content="be useful"), RunStartedEvent(),
        StatusChangeEvent(status=Status.RUNNING))  # fmt: skip
    task = UserMessageEvent(text="the task")
    add(task, UserMessageCheckedEvent(message_ids=[task.id]))
    add(SystemContextEvent(text="today"))
    kinds = ["step", "step", "step", "say", "user", "blocked", "run", "condense", "condense"]
    for n in range(data.draw(st.integers(1, 40))):
        kind = data.draw(st.sampled_from(kinds))
        usage = Usage(prompt_tokens=10 * n, completion_tokens=3, cost_usd=STEP_COST)
        if kind == "step":
            add(ActionEvent(tool_call_id=f"c{n}", tool="t", arguments="{}",
                            llm_response_id=f"r{n}", usage=usage))  # fmt: skip
            add(ObservationEvent(tool_call_id=f"c{n}", tool="t", content="x" * (n % 7) * 30))
        elif kind == "say":
            add(AgentMessageEvent(text=f"said {n}", usage=usage))
        elif kind in ("user", "blocked"):
            message = UserMessageEvent(text=f"more {n}")
            add(message)
            if kind == "user":
                add(UserMessageCheckedEvent(message_ids=[message.id]))
            else:
                add(UserMessageBlockedEvent(message_id=message.id, hook="h"))
        elif kind == "run":
            add(RunStartedEvent(), SystemContextEvent(text=f"context {n}"))
        elif (condensation := condensation_of(warm)) is not None:
            add(condensation)
    if data.draw(st.booleans()):
        add(UserMessageEvent(text="not checked yet"))
    cold = history.History.loaded(window_read(log))
    assert [e.id for e in warm.view] == [e.id for e in llm_view(s.event for s in log)]
    assert [e.id for e in cold.view] == [e.id for e in warm.view]
    assert cold.messages == warm.messages
    assert (cold.view_tokens, cold.last_prompt_tokens) == (
        warm.view_tokens, warm.last_prompt_tokens,
    )  # fmt: skip
    assert (cold.seqs, cold.window_from, cold.last_seq) == (
        warm.seqs, warm.window_from, warm.last_seq,
    )  # fmt: skip
    assert [e.id for e in cold.events] == [e.id for e in warm.events]
    assert cold.state.run_cost == pytest.approx(warm.state.run_cost)
    cold.state.run_cost = warm.state.run_cost
    assert cold.state == warm.state
    assert latest_context(cold.events) == latest_context([s.event for s in log])
    if warm.window_from > 1:
        assert len(warm.events) < len(log)
