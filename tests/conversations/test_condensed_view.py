"""The View applies condensations: forgotten events leave, the latest summary stands at its
offset, and building it in pieces gives what building it whole gives."""

from __future__ import annotations

from conversations.events import (
    ActionEvent,
    AgentMessageEvent,
    CondensationEvent,
    ObservationEvent,
    SystemPromptEvent,
    UserMessageBlockedEvent,
    UserMessageEvent,
)
from conversations.view import condense_view, llm_view, view_extend
from orchestration.step.messages import SUMMARY_OPENING, messages_from_events

SYSTEM = SystemPromptEvent(content="be useful")
TASK = UserMessageEvent(text="fix the build")


def call(n: int) -> tuple[ActionEvent, ObservationEvent]:
    action = ActionEvent(
        tool_call_id=f"c{n}", tool="terminal", arguments="{}", llm_response_id=f"r{n}"
    )
    return action, ObservationEvent(tool_call_id=f"c{n}", tool="terminal", content=f"out {n}")


A1, O1 = call(1)
A2, O2 = call(2)
A3, O3 = call(3)


def condensation(*forgotten, summary: str = "summary", offset: int = 2) -> CondensationEvent:
    return CondensationEvent(
        forgotten_ids=[e.id for e in forgotten], summary=summary, offset=offset
    )


def test_forgotten_events_leave_and_the_summary_stands_at_its_offset() -> None:
    first = condensation(A1, O1)
    log = [SYSTEM, TASK, A1, O1, A2, O2, first, A3, O3]
    assert llm_view(log) == [SYSTEM, TASK, first, A2, O2, A3, O3]


def test_a_later_condensation_replaces_the_summary_and_forgets_more() -> None:
    first = condensation(A1, O1, summary="one")
    second = condensation(A2, O2, summary="one and two")
    log = [SYSTEM, TASK, A1, O1, A2, O2, first, A3, O3, second]
    assert llm_view(log) == [SYSTEM, TASK, second, A3, O3]


def test_an_offset_past_the_view_is_clamped() -> None:
    far = condensation(A1, O1, offset=99)
    assert condense_view([SYSTEM, TASK, A1, O1], far) == [SYSTEM, TASK, far]


def test_the_log_keeps_everything_only_the_view_forgets() -> None:
    log = [SYSTEM, TASK, A1, O1, condensation(A1, O1)]
    assert [e for e in log if e.id in {A1.id, O1.id}] == [A1, O1]


def test_the_view_built_in_pieces_is_the_view_built_whole() -> None:
    first = condensation(A1, O1)
    second = condensation(A2, O2, summary="more")
    note = AgentMessageEvent(text="done")
    log = [SYSTEM, TASK, A1, O1, A2, O2, first, A3, O3, second, note]
    whole = llm_view(log)
    for size in range(1, len(log) + 1):
        view: list = []
        for start in range(0, len(log), size):
            view = view_extend(view, log[start : start + size])
        assert view == whole, size


def test_a_blocked_message_stays_out_of_a_condensed_view() -> None:
    blocked = UserMessageEvent(text="secret")
    later = condensation(A1, O1)
    log = [SYSTEM, TASK, A1, O1, blocked, UserMessageBlockedEvent(message_id=blocked.id, hook="h")]
    assert llm_view([*log, later]) == [SYSTEM, TASK, later]


def test_the_model_reads_the_summary_where_the_forgotten_events_were() -> None:
    log = [SYSTEM, TASK, A1, O1, A2, O2, condensation(A1, O1, summary="ran ls")]
    messages = messages_from_events(llm_view(log))
    assert [m["role"] for m in messages] == ["system", "user", "user", "assistant", "tool"]
    assert messages[2]["content"].startswith(SUMMARY_OPENING)
    assert "ran ls" in messages[2]["content"]
    assert "out 1" not in str(messages)
    assert messages[3]["tool_calls"][0]["id"] == messages[4]["tool_call_id"] == "c2"
