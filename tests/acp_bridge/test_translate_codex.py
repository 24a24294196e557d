"""Codex's tool results carry the command's output, not its permission prompt.

The updates below are what codex-acp (0.16) sends for a command it must ask about, as they
appear on the wire (src/thread.rs: exec_approval, exec_command_begin, exec_command_end): the
request's content is the reason, "Proposed Amendment" and "Available Decisions"; the call then
starts with no content (a client without Zed's terminal_output extension gets no terminal),
and ends with the ExecCommandEnd event as rawOutput.
"""

from __future__ import annotations

from typing import Any

import pytest
from acp import schema
from pydantic import TypeAdapter

from acp_bridge.translate import Translator
from conversations.events import ObservationEvent

PROMPT_TEXT = (
    "Listing the workspace needs approval\nProposed Amendment: ls\n-la\n"
    "Available Decisions: approved\napproved_for_session\nabort"
)
RAW_INPUT = {"call_id": "call_ls", "command": ["bash", "-lc", "ls -la"], "cwd": "/ws"}
PERMISSION = {
    "toolCallId": "call_ls", "kind": "execute", "status": "pending", "title": "ls -la",
    "rawInput": RAW_INPUT, "content": [{"type": "content", "content": {"type": "text", "text": PROMPT_TEXT}}],
}  # fmt: skip
OPTIONS = [
    {"optionId": "approved", "name": "Yes", "kind": "allow_once"},
    {"optionId": "abort", "name": "No", "kind": "reject_once"},
]
BEGIN = {
    "sessionUpdate": "tool_call", "toolCallId": "call_ls", "title": "ls -la", "kind": "execute",
    "status": "in_progress", "rawInput": RAW_INPUT,
}  # fmt: skip


def _end(exit_code: int, output: str) -> dict[str, Any]:
    return {
        "sessionUpdate": "tool_call_update", "toolCallId": "call_ls",
        "status": "completed" if exit_code == 0 else "failed",
        "rawOutput": {
            "call_id": "call_ls", "turn_id": "1", "command": ["bash", "-lc", "ls -la"],
            "cwd": "/ws", "exit_code": exit_code, "stdout": output, "stderr": "",
            "aggregated_output": output, "formatted_output": output,
            "duration": {"secs": 0, "nanos": 3000000}, "status": "completed",
        },
    }  # fmt: skip


def _delta(text: str) -> dict[str, Any]:
    return {
        "sessionUpdate": "tool_call_update", "toolCallId": "call_ls",
        "content": [{"type": "content", "content": {"type": "text", "text": text}}],
    }  # fmt: skip


UPDATE = TypeAdapter(schema.SessionNotification)


def _observations(*updates: dict[str, Any]) -> list[ObservationEvent]:
    translator = Translator()
    events = translator.permission(
        schema.ToolCallUpdate.model_validate(PERMISSION),
        [schema.PermissionOption.model_validate(o) for o in OPTIONS],
    )
    for update in updates:
        note = UPDATE.validate_python({"sessionId": "s", "update": update})
        events += translator.feed(note.update)
    events += translator.finish(reason="turn ended")
    return [e for e in events if isinstance(e, ObservationEvent)]


@pytest.mark.parametrize(
    ("exit_code", "output", "shown"),
    [
        (0, "total 0\na.txt\n", "total 0\na.txt\n"),
        (2, "ls: cannot access 'x'\n", "ls: cannot access 'x'\n(exit code 2)"),
        (0, "", "completed"),
    ],
)
def test_an_approved_codex_command_shows_its_output(exit_code, output, shown) -> None:
    [result] = _observations(BEGIN, _end(exit_code, output))
    assert result.content == shown
    assert (
        "Proposed Amendment" not in result.content and "Available Decisions" not in result.content
    )
    assert result.is_error == (exit_code != 0)


def test_output_streamed_as_content_is_kept() -> None:
    [result] = _observations(BEGIN, _delta("```sh\na.txt\n```\n"), _end(0, "a.txt\n"))
    assert result.content == "```sh\na.txt\n```\n"


def test_a_call_that_ends_without_output_does_not_show_the_prompt() -> None:
    [result] = _observations()  # the turn ended while the request was open
    assert result.content == "turn ended" and result.is_error
