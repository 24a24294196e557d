"""The summarising request and the hard reset's note: what the model is asked, and what stands
in for a summary that failed."""

from __future__ import annotations

from conversations.events import ActionEvent, AgentMessageEvent, ObservationEvent
from orchestration.step.condense import hard_reset_note
from orchestration.step.summary_prompt import MIN_EVENT_CHARS, SUMMARY_INSTRUCTION, summary_request

TASK = '{"script": []} fix the build'


def test_the_request_opens_with_the_task_then_the_previous_summary_then_the_events():
    forgotten = [
        ActionEvent(tool_call_id="c1", tool="terminal", arguments='{"command": "make"}',
                    thought="build it"),
        ObservationEvent(tool_call_id="c1", tool="terminal", content="error: x", is_error=True),
        AgentMessageEvent(text="it fails"),
    ]  # fmt: skip
    system, request = summary_request(
        task=TASK, previous="## Task\nearlier", forgotten=forgotten, max_chars=10_000
    )
    assert system == {"role": "system", "content": SUMMARY_INSTRUCTION}
    for section in ("## Task", "## Progress", "## Files touched", "## Open problems"):
        assert section in SUMMARY_INSTRUCTION
    text = request["content"]
    assert request["role"] == "user" and text.startswith(TASK)
    assert text.index("<previous_summary>\n## Task\nearlier") < text.index("<events>")
    assert '[tool call terminal] {"command": "make"}' in text and "build it" in text
    assert "[tool result terminal (error)] error: x" in text
    assert "[agent] it fails" in text


def test_long_events_are_clipped_to_fit_the_request():
    forgotten = [
        ObservationEvent(tool_call_id=f"c{i}", tool="terminal", content="x" * 5000)
        for i in range(10)
    ]
    _, request = summary_request(task=TASK, previous=None, forgotten=forgotten, max_chars=4000)
    text = request["content"]
    assert "<previous_summary>" not in text
    assert len(text) < 4000 + 10 * 80  # each clip says how much it cut
    assert text.count("characters cut]") == 10
    _, tiny = summary_request(task=TASK, previous=None, forgotten=forgotten, max_chars=10)
    assert tiny["content"].count("x" * (MIN_EVENT_CHARS - 30)) == 10  # never clipped to nothing


def test_a_hard_reset_note_says_what_was_dropped_and_why():
    note = hard_reset_note(7, "empty answer", None)
    assert note.startswith("7 earlier events") and "empty answer" in note
    assert "summary of what came before" not in note
    kept = hard_reset_note(1, "timeout", "## Task\nearlier")
    assert kept.startswith("1 earlier event of") and kept.endswith("## Task\nearlier")
