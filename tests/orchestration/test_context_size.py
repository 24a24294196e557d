"""The View's token estimate and the model's context limit: the profile's setting first, then
LiteLLM's local model map, else unknown."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace

from conversations.events import ActionEvent, ObservationEvent, UserMessageEvent
from conversations.store import StoredEvent
from orchestration.step.condense import Condenser
from orchestration.step.context_size import MESSAGE_OVERHEAD, context_limit, event_tokens
from orchestration.step.history import History
from orchestration.step.profiles import BUILTIN_PROFILES, ModelProfile, profile_get


def test_an_event_costs_its_text_in_quarters_plus_the_message_overhead():
    assert event_tokens(UserMessageEvent(text="x" * 400)) == 100 + MESSAGE_OVERHEAD
    assert event_tokens(ObservationEvent(tool_call_id="c", tool="t", content="")) == 4
    action = ActionEvent(tool_call_id="c", tool="terminal", arguments='{"command": "ls"}')
    assert event_tokens(action) == len('terminal{"command": "ls"}') // 4 + MESSAGE_OVERHEAD


def test_the_profiles_own_limit_comes_first():
    profile = ModelProfile(name="p", model="openai/gpt-4o", max_input_tokens=1000)
    assert context_limit(profile) == 1000


def test_else_litellms_local_model_map_knows_the_model():
    assert context_limit(ModelProfile(name="p", model="openai/gpt-4o")) == 128_000
    assert context_limit(BUILTIN_PROFILES["scripted"]) is None  # not in the map


def test_a_site_profile_may_set_its_limit_and_it_never_reaches_litellm(monkeypatch):
    monkeypatch.setenv(
        "CANVAS_MODEL_PROFILES",
        json.dumps({"small": {"model": "openai/gpt-4o", "max_input_tokens": 4096, "top_p": 1}}),
    )
    profile = profile_get("small")
    assert profile.max_input_tokens == 4096 and profile.extra == {"top_p": 1}


def test_the_trigger_check_reads_running_counts_never_the_history(monkeypatch):
    """Per-step cost stays flat: checking costs nothing per View event, and a new event is
    estimated once, however long the View already is."""
    from orchestration.step import condense, history

    log = History()
    events = [UserMessageEvent(text="x" * 40) for _ in range(2000)]
    log.extend([stored(i + 1, e) for i, e in enumerate(events)], "c")
    profile = ModelProfile(name="p", model="canvas/scripted", max_input_tokens=100_000)
    condenser = Condenser(SimpleNamespace(history=log, llm=SimpleNamespace(profile=profile)))
    counted: list = []

    def counting(event):
        counted.append(event)
        return event_tokens(event)

    monkeypatch.setattr(history, "event_tokens", counting)
    monkeypatch.setattr(condense, "event_tokens", counting)
    assert not condenser.due() and counted == []
    log.extend([stored(2001, UserMessageEvent(text="one more"))], "c")
    assert len(counted) == 1
    assert log.view_tokens == 2000 * (10 + MESSAGE_OVERHEAD) + event_tokens(counted[0])
    monkeypatch.setattr(condenser.runner.history, "view_tokens", 80_000)  # 80% of the limit
    assert condenser.due()


def stored(seq: int, event) -> StoredEvent:
    return StoredEvent(seq=seq, created_at=datetime.now(UTC), event=event)
