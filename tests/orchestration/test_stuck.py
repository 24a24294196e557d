"""Each stuck pattern, and the cases that must not count as stuck."""

import json
from itertools import count

from conversations.events import (
    ActionEvent,
    AgentMessageEvent,
    ObservationEvent,
    UserMessageEvent,
)
from orchestration.step.stuck import detect_stuck

_ids = count()


def step(command: str, output: str = "ok", *, error: bool = False, risk: str = "LOW"):
    call_id = f"c{next(_ids)}"
    return [
        ActionEvent(
            tool_call_id=call_id, tool="terminal",
            arguments=json.dumps({"command": command, "security_risk": risk}),
        ),
        ObservationEvent(tool_call_id=call_id, tool="terminal", content=output, is_error=error),
    ]  # fmt: skip


def steps(*pairs) -> list:
    return [event for pair in pairs for event in pair]


def test_same_action_and_observation_four_times():
    events = steps(*[step("ls", risk=r) for r in ("LOW", "HIGH", "LOW", "MEDIUM")])
    assert detect_stuck(events).pattern == "repeated_action"
    assert detect_stuck(events[:-2]) is None


def test_same_action_and_error_three_times_even_with_changing_messages():
    events = steps(*[step("make", f"error {i}", error=True) for i in range(3)])
    assert detect_stuck(events).pattern == "repeated_error"
    assert (
        detect_stuck(
            steps(step("make", "e", error=True), step("make"), step("make", "e", error=True))
        )
        is None
    )


def test_talking_to_itself_three_times():
    events = [AgentMessageEvent(text=f"hmm {i}") for i in range(3)]
    assert detect_stuck(events).pattern == "monologue"
    assert detect_stuck(events[:2] + step("ls") + events[2:]) is None


def test_alternating_pattern_six_times():
    events = steps(*[step("cd a", "x") if i % 2 == 0 else step("cd b", "y") for i in range(6)])
    assert detect_stuck(events).pattern == "alternating"
    assert detect_stuck(events[:-2]) is None


def test_only_counts_since_the_last_user_message():
    looping = steps(*[step("ls") for _ in range(3)])
    events = looping + [UserMessageEvent(text="try something else")] + steps(step("ls"))
    assert detect_stuck(events) is None
    assert detect_stuck(looping + steps(step("ls"))).pattern == "repeated_action"


def test_progress_is_not_stuck():
    events = steps(*[step(f"echo {i}", str(i)) for i in range(10)])
    assert detect_stuck(events) is None
