"""Slices driven by hand (no worker): leases, duplicates, recovery, limits, errors."""

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from conversations import store
from conversations.events import ActionEvent, ObservationEvent
from conversations.models import Conversation
from orchestration import run_control, services
from orchestration.chain.lease import lease_claim
from orchestration.chain.slices import run_slice
from orchestration.chain.sweep import sweep_runs
from tests.runs import drive, script

pytestmark = pytest.mark.django_db(transaction=True)


def types(conversation) -> list[str]:
    return [s.event.type for s in store.load(conversation.pk)]


def test_scripted_run_finishes_across_several_slices(dispatched, settings):
    settings.CANVAS_SLICE_STEPS = 2
    conversation = services.conversation_create(
        owner=None,
        model="scripted",
        prompt=script(
            {"tool": "terminal", "args": {"command": "echo one > f.txt"}},
            {"tool": "terminal", "args": {"command": "cat f.txt"}},
            {"tool": "think", "args": {"thought": "fine"}},
            {"tool": "finish", "args": {"message": "done"}},
        ),
    )
    assert len(dispatched) == 1
    drive(dispatched)
    conversation.refresh_from_db()
    assert conversation.status == "finished"
    assert conversation.run_slice is None and conversation.lease_token is None
    assert conversation.steps == 4
    results = [s.event for s in store.load(conversation.pk) if s.event.type == "tool.result"]
    assert results[1].content.startswith("one")
    assert results[-1].content == "done"
    assert types(conversation)[-2:] == ["status.changed", "run.finished"]


def test_a_stale_or_duplicate_slice_does_nothing(dispatched):
    conversation = services.conversation_create(
        owner=None, model="scripted", prompt=script({"say": "hi"})
    )
    conversation_id, slice_id = dispatched.pop()
    assert run_slice(conversation_id, "not-the-current-slice") is None
    assert types(conversation)[-1] == "status.changed"  # nothing ran
    run_slice(conversation_id, slice_id)
    before = types(conversation)
    assert before[-1] == "run.finished"
    run_slice(conversation_id, slice_id)  # a redelivery after the fact
    assert types(conversation) == before


def test_a_slice_waits_while_another_runner_holds_a_live_lease(dispatched):
    conversation = services.conversation_create(
        owner=None, model="scripted", prompt=script({"say": "hi"})
    )
    conversation_id, slice_id = dispatched.pop()
    assert lease_claim(conversation_id, slice_id).claimed
    wait = run_slice(conversation_id, slice_id)  # the same slice, redelivered while running
    assert wait is not None and 0 < wait <= 31
    Conversation.objects.filter(pk=conversation_id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert run_slice(conversation_id, slice_id) is None  # the expired lease is taken over
    assert types(conversation)[-1] == "run.finished"


def test_an_action_without_observation_is_marked_interrupted_not_rerun(dispatched):
    conversation = services.conversation_create(
        owner=None,
        model="scripted",
        prompt=script(
            {"tool": "terminal", "args": {"command": "echo ran >> ran.txt"}},
            {"say": "after"},
        ),
    )
    # A worker persisted the action, then died before running it.
    store.append(
        conversation.pk,
        [
            ActionEvent(
                tool_call_id="call_0_0", tool="terminal",
                arguments=json.dumps({"command": "echo ran >> ran.txt"}),
            )
        ],
    )  # fmt: skip
    drive(dispatched)
    events = [s.event for s in store.load(conversation.pk)]
    observation = next(e for e in events if isinstance(e, ObservationEvent))
    assert observation.interrupted and observation.is_error
    assert "interrupted" in observation.content
    assert not (Path(conversation.workspace_path) / "ran.txt").exists()  # commands write there
    assert events[-1].type == "run.finished"


def test_max_iterations_ends_the_run_with_a_clear_event(dispatched):
    conversation = services.conversation_create(
        owner=None,
        model="scripted",
        max_iterations=2,
        prompt=script(*[{"tool": "think", "args": {"thought": str(i)}} for i in range(5)]),
    )
    drive(dispatched)
    conversation.refresh_from_db()
    assert conversation.status == "error"
    error = next(s.event for s in store.load(conversation.pk) if s.event.type == "agent.error")
    assert error.code == "max_iterations" and "2 iterations" in error.message
    # A new message continues the conversation with a fresh iteration budget.
    services.conversation_post_message(conversation_id=conversation.pk, text="go on", sender=None)
    drive(dispatched)
    conversation.refresh_from_db()
    assert conversation.status in {"finished", "error"}
    assert types(conversation).count("run.started") == 2


def test_unknown_model_profile_is_refused_up_front(dispatched):
    from common.errors import InvalidInput

    with pytest.raises(InvalidInput, match="No model profile"):
        services.conversation_create(owner=None, model="no-such-model", prompt="hi")
    assert Conversation.objects.count() == 0


def test_sweeper_reenqueues_a_run_whose_runner_died(dispatched):
    conversation = services.conversation_create(
        owner=None, model="scripted", prompt=script({"say": "hi"})
    )
    conversation_id, old_slice = dispatched.pop()
    lease_claim(conversation_id, old_slice)
    Conversation.objects.filter(pk=conversation_id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=5)
    )
    assert sweep_runs() == 1
    ((_, new_slice),) = dispatched
    assert new_slice != old_slice
    assert run_slice(conversation_id, old_slice) is None  # the dead runner's slice is void
    drive(dispatched)
    assert types(conversation)[-1] == "run.finished"
    assert sweep_runs() == 0


def test_pause_stops_between_steps_and_run_resumes(dispatched, settings):
    settings.CANVAS_SLICE_STEPS = 1
    conversation = services.conversation_create(
        owner=None,
        model="scripted",
        prompt=script(*[{"tool": "think", "args": {"thought": str(i)}} for i in range(3)]),
    )
    conversation_id, slice_id = dispatched.pop()
    run_slice(conversation_id, slice_id)
    run_control.conversation_pause(conversation_id=conversation_id, by=None)
    drive(dispatched)
    conversation.refresh_from_db()
    assert conversation.status == "paused"
    assert types(conversation).count("tool.call") == 1
    with pytest.raises(Exception, match="not running"):
        run_control.conversation_pause(conversation_id=conversation_id, by=None)
    run_control.conversation_run(conversation_id=conversation_id, by=None)
    with pytest.raises(Exception, match="already running"):
        run_control.conversation_run(conversation_id=conversation_id, by=None)
    drive(dispatched)
    conversation.refresh_from_db()
    assert conversation.status == "finished"


def test_a_message_sent_while_running_is_read_at_the_next_step(dispatched, settings):
    settings.CANVAS_SLICE_STEPS = 1
    seen: list[list[str]] = []

    class Recorder:
        """Answers like the scripted model and records what the model was shown."""

        def complete(self, messages, tools):
            from orchestration.step.llm import LiteLLMClient
            from orchestration.step.profiles import BUILTIN_PROFILES

            seen.append([m.get("content") or "" for m in messages if m["role"] == "user"])
            return LiteLLMClient(BUILTIN_PROFILES["scripted"]).complete(messages, tools)

    conversation = services.conversation_create(
        owner=None, model="scripted",
        prompt=script({"tool": "think", "args": {"thought": "a"}}, {"say": "done"}),
    )  # fmt: skip
    conversation_id, slice_id = dispatched.pop()
    run_slice(conversation_id, slice_id, llm=Recorder())
    services.conversation_post_message(conversation_id=conversation.pk, text="also X", sender=None)
    assert len(dispatched) == 1  # no second runner: the running one reads it
    conversation_id, slice_id = dispatched.pop()
    run_slice(conversation_id, slice_id, llm=Recorder())
    assert "also X" not in seen[0] and "also X" in seen[1]
    assert types(conversation).count("run.started") == 1


def test_an_abandoned_model_call_is_billed_when_its_answer_arrives(dispatched):
    """An Interrupt walks away from a slow model at once; the provider bills the call anyway,
    so its cost reaches the team's monthly spend when the answer comes."""
    import threading

    from conversations.events import Usage
    from orchestration.step.llm import LLMResponse
    from teams.budget import spend_this_month
    from tests.conftest import wait_for

    called, answer = threading.Event(), threading.Event()

    class SlowModel:
        def complete(self, messages, tools):
            called.set()
            answer.wait(30)
            return LLMResponse(id="slow", content="late", tool_calls=[],
                               usage=Usage(prompt_tokens=10, cost_usd=0.25))  # fmt: skip

    conversation = services.conversation_create(owner=None, model="scripted", prompt="hi")
    conversation_id, slice_id = dispatched.pop()

    def run() -> None:
        try:
            run_slice(conversation_id, slice_id, llm=SlowModel())
        finally:
            connection.close()

    runner = threading.Thread(target=run)
    runner.start()
    assert called.wait(30)
    run_control.conversation_interrupt(conversation_id=conversation_id, by=None)
    runner.join(10)
    assert not runner.is_alive(), "the slice waited for the model"
    assert spend_this_month(conversation.team_id) == 0
    answer.set()
    wait_for(lambda: spend_this_month(conversation.team_id) > 0, 10, 0.05,
             message="the abandoned call's cost on the bill")  # fmt: skip
    assert float(spend_this_month(conversation.team_id)) == 0.25
    assert "late" not in json.dumps([s.event.model_dump(mode="json") for s in
                                     store.load(conversation.pk)])  # fmt: skip
