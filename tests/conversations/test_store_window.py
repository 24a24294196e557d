"""A cold reader of a condensed log reads its window (conversations.window) and the row's run
counts, which every append keeps in step with the log, on both append paths."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from conversations import store
from conversations.events import (
    ActionEvent,
    AgentMessageEvent,
    ChildSpawn,
    CondensationEvent,
    ObservationEvent,
    RunStartedEvent,
    Status,
    StatusChangeEvent,
    SubagentsSpawnedEvent,
    SystemContextEvent,
    Usage,
    UserMessageEvent,
)
from conversations.models import Conversation
from conversations.projections import RunState
from conversations.window import Window
from tests.factories import make_conversation

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True, params=["one-statement", "portable"])
def append_path(request, settings):
    settings.CANVAS_STORE_FAST_PATH = request.param == "one-statement"


def step(n: int, cost: float = 0.25) -> list:
    usage = Usage(prompt_tokens=10, completion_tokens=2, cost_usd=cost)
    return [
        ActionEvent(tool_call_id=f"c{n}", tool="t", arguments="{}", llm_response_id=f"r{n}",
                    usage=usage),
        ObservationEvent(tool_call_id=f"c{n}", tool="t", content="done"),
    ]  # fmt: skip


def spawned(n: int, children: int) -> SubagentsSpawnedEvent:
    return SubagentsSpawnedEvent(
        tool_call_id=f"c{n}", tool="delegate",
        children=[ChildSpawn(conversation_id=f"x{i}", name=f"k{i}", subagent_type="general")
                  for i in range(children)],
    )  # fmt: skip


def row_counts(pk) -> tuple:
    row = Conversation.objects.get(pk=pk)
    return row.status, row.run_steps, pytest.approx(row.run_cost), row.run_children


def folded(pk) -> tuple:
    state = RunState().apply(s.event for s in store.load(pk))
    return state.status.value, state.run_steps, state.run_cost, state.run_children


def test_the_row_counts_the_current_run_as_the_log_does():
    pk = make_conversation().pk
    store.append(pk, [RunStartedEvent(), StatusChangeEvent(status=Status.RUNNING), *step(1)])
    store.append(pk, [*step(2, cost=0.5), spawned(2, 3)])
    assert row_counts(pk) == folded(pk) == ("running", 2, 0.75, 3)
    # A batch that ends one run and starts the next counts only what follows its start.
    store.append(pk, [AgentMessageEvent(text="x", usage=Usage(cost_usd=2.0)), RunStartedEvent(),
                      *step(3, cost=0.125), spawned(3, 1)])  # fmt: skip
    assert row_counts(pk) == folded(pk) == ("running", 1, 0.125, 1)
    store.append(pk, [RunStartedEvent(), StatusChangeEvent(status=Status.PAUSED)])
    assert row_counts(pk) == folded(pk) == ("paused", 0, 0.0, 0)


def long_log(pk, *, kept_fields: bool = True) -> list[CondensationEvent]:
    """40 steps over two runs, condensed twice; returns the condensations."""
    store.append(pk, [RunStartedEvent(), StatusChangeEvent(status=Status.RUNNING)])
    task = store.append(pk, [UserMessageEvent(text="the task")])[0]
    store.append(pk, [SystemContextEvent(text="first run")])
    for n in range(10):
        store.append(pk, step(n))
    store.append(pk, [RunStartedEvent(), SystemContextEvent(text="second run")])
    condensations = []
    for n in range(10, 40):
        written = store.append(pk, step(n))
        if n in (19, 34):
            from_seq = written[0].seq - 4  # the two steps before kept
            condensation = CondensationEvent(
                forgotten_ids=[], summary=f"up to {n}", offset=1,
                kept_head_seqs=[task.seq] if kept_fields else [],
                kept_from_seq=from_seq if kept_fields else None,
            )  # fmt: skip
            store.append(pk, [condensation])
            condensations.append(condensation)
    return condensations


def test_a_condensed_log_is_read_as_its_window_with_the_rows_counts(django_assert_num_queries):
    pk = make_conversation().pk
    latest = long_log(pk)[-1]
    log = store.load(pk)
    with django_assert_num_queries(3):  # the row, the latest condensation, the window
        read = store.load_window(pk)
    window = Window.of(latest)
    expected = window.keep([s.seq for s in log], [s.event.type for s in log])
    assert [s.seq for s in read.events] == [log[i].seq for i in expected]
    types = [s.event.type for s in read.events]
    assert types[:3] == ["message.user", "run.started", "system.context"]  # head, then marks
    assert [e.text for e in (s.event for s in read.events) if e.type == "system.context"] == [
        "second run"
    ]
    assert read.events[3].seq == latest.kept_from_seq
    # Of 88 events: the head and two marks, steps 32-34, the condensation, steps 35-39.
    assert len(read.events) == 3 + 6 + 1 + 10
    assert read.counts is not None and read.counts.last_seq == log[-1].seq
    counts = (read.counts.status, read.counts.run_steps, pytest.approx(read.counts.run_cost),
              read.counts.run_children)  # fmt: skip
    assert counts == folded(pk) == ("running", 30, 7.5, 0)


def test_a_log_without_a_recorded_window_is_read_whole():
    never = make_conversation().pk
    store.append(never, [UserMessageEvent(text="hi"), *step(1)])
    read = store.load_window(never)
    assert [s.seq for s in read.events] == [1, 2, 3] and read.counts is None
    older = make_conversation().pk  # condensed before condensations recorded their window
    long_log(older, kept_fields=False)
    read = store.load_window(older)
    assert [s.seq for s in read.events] == [s.seq for s in store.load(older)]
    assert read.counts is None
    assert store.load_window("00000000-0000-0000-0000-000000000000").events == []


def test_the_migration_fills_in_the_counts_of_runs_in_progress():
    pk = make_conversation().pk
    store.append(pk, [RunStartedEvent(), StatusChangeEvent(status=Status.RUNNING),
                      *step(1, cost=0.5), spawned(1, 2), *step(2)])  # fmt: skip
    Conversation.objects.filter(pk=pk).update(run_cost=0, run_children=0)
    migration = importlib.import_module("conversations.migrations.0006_run_counts_and_window_marks")
    migration.backfill_run_counts(apps, None)
    assert row_counts(pk) == folded(pk) == ("running", 2, 0.75, 2)
