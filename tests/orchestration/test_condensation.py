"""Condensation driven end to end with the scripted model: a tiny context limit (the team
profile's) or the model's own context-window refusal condenses the View; the summary is an
event in the log, the View applies it, a failed summary is a hard reset, and a worker that
resumes on a fresh history reads the same View."""

from __future__ import annotations

import pytest

from conversations import store
from conversations.events import (
    ActionEvent,
    AgentErrorEvent,
    CondensationEvent,
    ObservationEvent,
    SystemPromptEvent,
    UserMessageEvent,
)
from conversations.models import Conversation
from orchestration import services
from orchestration.chain.slices import run_slice
from orchestration.step import history as history_cache
from orchestration.step.context_size import event_tokens
from orchestration.step.history import History, history_refresh
from orchestration.step.messages import SUMMARY_OPENING
from teams.models import ModelProfile
from tests.runs import drive, script

pytestmark = pytest.mark.django_db(transaction=True)  # slices run as a worker would

TOOLS = ["terminal", "finish"]
SUMMARY = "## Task\nPrint lines.\n## Progress\nPrinted some.\n## Files touched\nNone.\n## Open problems\nNone."
TURNS = 20
OUTPUT_CHARS = 1200


def turns(count: int = TURNS) -> list[dict]:
    """Terminal calls each printing OUTPUT_CHARS of one letter (distinct calls, so the stuck
    detector stays quiet), then finish."""
    calls = [
        {"tool": "terminal", "args": {"command": f"python3 -c \"print('{chr(97 + i)}' * {OUTPUT_CHARS})\""}}
        for i in range(count)
    ]  # fmt: skip
    return [*calls, {"tool": "finish", "args": {"message": "printed"}}]


def events_of(conversation) -> list:
    return [s.event for s in store.load(conversation.pk)]


def start(user, team, *, limit_over_head: int | None, **extra) -> Conversation:
    """A conversation on the scripted model whose context limit leaves `limit_over_head`
    tokens beside the system prompt and task (None: the built-in profile, no limit known)."""
    model = "scripted"
    if limit_over_head is not None:
        model = "tiny"
        ModelProfile.objects.create(team=team, name=model, model="canvas/scripted")
    conversation = services.conversation_create(
        owner=user, model=model, prompt=script(*turns(), **extra), tools=TOOLS
    )
    if limit_over_head is not None:
        head = sum(
            event_tokens(e)
            for e in events_of(conversation)
            if isinstance(e, SystemPromptEvent | UserMessageEvent)
        )
        ModelProfile.objects.filter(team=team, name=model).update(
            max_input_tokens=int((head + limit_over_head) / 0.4)  # the kept share (condense.py)
        )
    return conversation


def fresh_history(conversation_id: str) -> History:
    """The history a cold worker builds: the process cache emptied first."""
    history_cache._cache.clear()
    return history_refresh(conversation_id)


def assert_whole_pairs(view: list) -> None:
    calls = {e.tool_call_id for e in view if isinstance(e, ActionEvent)}
    results = {e.tool_call_id for e in view if isinstance(e, ObservationEvent)}
    assert results <= calls


def test_a_tiny_context_limit_condenses_with_the_models_summary(user, team, dispatched):
    conversation = start(user, team, limit_over_head=3 * 320, summary=SUMMARY)
    drive(dispatched)
    conversation.refresh_from_db()
    assert conversation.status == "finished"
    events = events_of(conversation)
    condensations = [e for e in events if isinstance(e, CondensationEvent)]
    assert len(condensations) >= 2, "the limit was not reached twice"
    first = condensations[0]
    assert (first.summary, first.hard_reset, first.trigger, first.offset) == (
        SUMMARY, False, "limit", 2,
    )  # fmt: skip
    assert first.usage is not None and first.usage.prompt_tokens > 0
    # What it forgot is the oldest part after the task, in whole call-and-result pairs.
    by_id = {e.id: e for e in events}
    forgotten = [by_id[i] for i in first.forgotten_ids]
    view_events = [e for e in events if isinstance(e, ActionEvent | ObservationEvent)]
    assert forgotten == view_events[: len(forgotten)]
    assert_whole_pairs(forgotten)
    # Every turn played once: the script went on from where it was, never replayed.
    commands = [e.arguments for e in events if isinstance(e, ActionEvent)]
    assert len(commands) == TURNS + 1 and len(set(commands)) == TURNS + 1
    assert len({e.tool_call_id for e in events if isinstance(e, ActionEvent)}) == TURNS + 1
    # The View after it: system prompt, task, the latest summary, then the latest events.
    history = fresh_history(str(conversation.pk))
    latest = condensations[-1]
    system, task, summary, *rest = history.view
    assert isinstance(system, SystemPromptEvent) and isinstance(task, UserMessageEvent)
    assert summary == latest and not any(isinstance(e, CondensationEvent) for e in rest)
    forgotten_ids = {i for c in condensations for i in c.forgotten_ids}
    assert not forgotten_ids & {e.id for e in history.view}
    assert_whole_pairs(history.view)
    assert history.messages[2]["role"] == "user"
    assert history.messages[2]["content"].startswith(SUMMARY_OPENING)
    assert SUMMARY in history.messages[2]["content"]
    # Each model request after a condensation stayed under the limit.
    limit = ModelProfile.objects.get(team=team, name="tiny").max_input_tokens
    assert history.view_tokens < limit
    steps = [e for e in events if isinstance(e, ActionEvent) and e.usage]
    assert max(e.usage.prompt_tokens for e in steps) < limit


@pytest.mark.parametrize(
    ("summary", "why"),
    [("", "empty answer"), ({"error": "summariser down"}, "summariser down")],
    ids=["empty", "error"],
)
def test_a_failed_summary_is_a_hard_reset_and_the_run_goes_on(user, team, dispatched, summary, why):
    conversation = start(user, team, limit_over_head=3 * 320, summary=summary)
    drive(dispatched)
    conversation.refresh_from_db()
    assert conversation.status == "finished"
    events = events_of(conversation)
    resets = [e for e in events if isinstance(e, CondensationEvent)]
    assert resets and all(e.hard_reset for e in resets)
    assert why in resets[0].summary and "dropped" in resets[0].summary
    view = fresh_history(str(conversation.pk)).view
    assert isinstance(view[1], UserMessageEvent) and view[1].text.startswith('{"script"')
    assert view[2] == resets[-1]
    assert isinstance(view[-1], ObservationEvent)  # the latest events are kept
    assert_whole_pairs(view)
    commands = [e.arguments for e in events if isinstance(e, ActionEvent)]
    assert len(commands) == len(set(commands)) == TURNS + 1


def test_a_worker_resuming_after_condensation_reads_the_same_view(user, team, dispatched, settings):
    """One step per slice, and a cold cache before every slice: each slice rebuilds its
    history from the log, and the run goes exactly as the cached one does."""
    settings.CANVAS_SLICE_STEPS = 1
    conversation = start(user, team, limit_over_head=3 * 320, summary=SUMMARY)
    conversation_id = str(conversation.pk)
    checked = 0
    for _ in range(100):
        if not dispatched:
            break
        cached = history_refresh(conversation_id)
        fresh = fresh_history(conversation_id)
        assert [e.id for e in fresh.view] == [e.id for e in cached.view]
        assert fresh.messages == cached.messages
        assert (fresh.view_tokens, fresh.last_prompt_tokens) == (
            cached.view_tokens, cached.last_prompt_tokens,
        )  # fmt: skip
        # The same window of the log, and the same run state from it and the row.
        assert (fresh.seqs, fresh.window_from) == (cached.seqs, cached.window_from)
        assert [e.id for e in fresh.events] == [e.id for e in cached.events]
        assert fresh.state.run_cost == pytest.approx(cached.state.run_cost)
        fresh.state.run_cost = cached.state.run_cost
        assert fresh.state == cached.state
        if any(isinstance(e, CondensationEvent) for e in fresh.view):
            checked += 1
            assert len(fresh.events) < fresh.last_seq  # it read the window, not the log
        run_slice(*dispatched.pop(0))
    conversation.refresh_from_db()
    assert conversation.status == "finished" and checked
    events = events_of(conversation)
    assert any(isinstance(e, CondensationEvent) for e in events)
    commands = [e.arguments for e in events if isinstance(e, ActionEvent)]
    assert len(commands) == len(set(commands)) == TURNS + 1


def test_the_models_context_window_refusal_condenses_and_the_run_goes_on(user, team, dispatched):
    """No limit is known (the built-in profile): the model's refusal is what condenses."""
    window = 3000  # the scripted model's tokens: characters of content / 4
    conversation = start(user, team, limit_over_head=None, summary=SUMMARY, context_window=window)
    drive(dispatched)
    conversation.refresh_from_db()
    assert conversation.status == "finished"
    events = events_of(conversation)
    condensations = [e for e in events if isinstance(e, CondensationEvent)]
    assert condensations and {e.trigger for e in condensations} == {"context_window"}
    assert condensations[0].summary == SUMMARY
    assert not any(isinstance(e, AgentErrorEvent) for e in events)
    commands = [e.arguments for e in events if isinstance(e, ActionEvent)]
    assert len(commands) == len(set(commands)) == TURNS + 1


def test_a_refusal_nothing_can_relieve_ends_the_run_with_its_error(user, team, dispatched):
    conversation = start(user, team, limit_over_head=None, context_window=10)
    drive(dispatched)
    conversation.refresh_from_db()
    assert conversation.status == "error"
    events = events_of(conversation)
    assert not any(isinstance(e, CondensationEvent) for e in events)
    error = next(e for e in events if isinstance(e, AgentErrorEvent))
    assert error.code == "llm_context_window_exceeded"
    assert "maximum context length" in error.message


@pytest.mark.worker
def test_another_worker_process_resumes_after_condensation(user, team, dispatched, start_worker):
    """This process runs slices until the View is condensed, then a real worker, whose cache
    has never seen the conversation, takes the run over from the log and finishes it."""
    from celery import current_app

    from orchestration.chain.dispatch import RUN_SLICE_TASK
    from tests.conftest import wait_for

    conversation = start(user, team, limit_over_head=3 * 320, summary=SUMMARY)
    conversation_id = str(conversation.pk)
    while not any(isinstance(e, CondensationEvent) for e in events_of(conversation)):
        run_slice(*dispatched.pop(0))
    here = history_refresh(conversation_id)
    ((_, next_slice),) = dispatched
    start_worker()
    current_app.send_task(RUN_SLICE_TASK, args=[conversation_id, next_slice])
    wait_for(
        lambda: Conversation.objects.get(pk=conversation.pk).status == "finished",
        90,
        message="the worker to finish the run",
    )
    events = events_of(conversation)
    condensed_here = {e.id for e in here.view if isinstance(e, CondensationEvent)}
    later = [e for e in events if isinstance(e, CondensationEvent) and e.id not in condensed_here]
    # The worker read the condensed View: it went on from the kept turns, never replayed one.
    commands = [e.arguments for e in events if isinstance(e, ActionEvent)]
    assert len(commands) == len(set(commands)) == TURNS + 1
    assert later, "the worker condensed again, from the View it rebuilt"
    already = {i for e in events if e.id in condensed_here for i in e.forgotten_ids}
    assert already and not already & set(later[0].forgotten_ids)  # it cut that View, not the log


def test_a_task_that_fills_the_context_is_not_condensed_for_every_step(user, team, dispatched):
    """The head (system prompt and task) over the trigger by itself: a condensation that would
    forget a step or two gains nothing, so it waits until the View has grown by a tenth of the
    limit, instead of summarising at every step."""
    thoughts = [{"tool": "think", "args": {"thought": f"step {i}"}} for i in range(30)]
    prompt = script(*thoughts, {"tool": "finish", "args": {"message": "done"}},
                    summary=SUMMARY, note="background " * 1500)  # fmt: skip
    ModelProfile.objects.create(team=team, name="full", model="canvas/scripted")
    conversation = services.conversation_create(owner=user, model="full", prompt=prompt,
                                                tools=["think", "finish"])  # fmt: skip
    head = sum(event_tokens(e) for e in events_of(conversation)
               if isinstance(e, SystemPromptEvent | UserMessageEvent))  # fmt: skip
    ModelProfile.objects.filter(team=team, name="full").update(max_input_tokens=int(head / 0.9))
    drive(dispatched, limit=200)
    conversation.refresh_from_db()
    events = events_of(conversation)
    assert conversation.status == "finished", [e.type for e in events][-6:]
    assert 1 <= sum(isinstance(e, CondensationEvent) for e in events) <= 5
