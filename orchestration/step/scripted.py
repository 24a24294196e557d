"""Deterministic models: what they answer, and a client that answers without LiteLLM.

`canvas/scripted` plays a script given as the first user message; `canvas/demo` plays a
built-in one. A title request (orchestration.title_model) gets the script's "title". Both are stateless: the next turn is derived from how many assistant messages
the request already holds, so any worker can serve any step. A condensed View holds fewer
assistant messages than turns played, so the count also reads the model's own call ids
(`call_<turn>_<index>`), which a condensation keeps with the latest turns.

Condensation (orchestration.step.condense) is scripted too: a summarising request gets the
script's "summary" (a string, or {"error": message} to fail the call), and a script with
"context_window": N refuses, as a provider would, any turn whose prompt is over N tokens
(characters of content / 4, as its usage counts them). A turn {"fail": message} fails its call.

Runs reach them through `ScriptedClient` (orchestration.step.llm.model_client), which never
imports LiteLLM: the CLI, `make up` and a worker running only these models start and step
without it. The same turns are also registered as LiteLLM's "canvas" custom provider
(orchestration.step.scripted_litellm), so tests can drive LiteLLM's own path with them; the
two answer alike, errors included (tests/orchestration/test_scripted_direct.py).
"""

from __future__ import annotations

import json
import re
from typing import Any

from conversations.events import Usage

from ..titles import TITLE_INSTRUCTION
from .llm import CONTEXT_WINDOW_EXCEEDED, ContextWindowError, LLMError, LLMResponse, ToolCall
from .profiles import ModelProfile
from .summary_prompt import SUMMARY_INSTRUCTION

NOT_A_SCRIPT = (
    "I am the scripted test model. Send a JSON object as the first message, like "
    '{"script": [{"tool": "think", "args": {"thought": "hi"}}, {"say": "done"}]}, '
    "and I will play it turn by turn."
)

DEMO_TITLE = "FizzBuzz, written and fixed"
NO_TITLE = "A scripted run"
"""A title request's answer when the script has no "title"."""
NO_SUMMARY = (
    "## Task\nA scripted run.\n## Progress\nSome turns played.\n"
    "## Files touched\nNone.\n## Open problems\nNone."
)
"""A summarising request's answer when the script has no "summary"."""

DEMO_DONE = (
    "I am the built-in demo model and only know the one walkthrough you just saw. "
    "Start a conversation with a real model profile to keep working on this."
)

_DEMO_BUGGY = '''"""FizzBuzz, written by the demo agent."""


def fizzbuzz(n: int) -> str:
    if n % 15 == 0:
        return "FizzBuzz"
    if n % 3 == 0:
        return "Fizz"
    if n % 5 == 0:
        return "Buzz"
    return str(n)


if __name__ == "__main__":
    print(" ".join(fizz_buzz(i) for i in range(1, 16)))
'''


def demo_script(prompt: str) -> list[dict[str, Any]]:
    """Explore, write a program with a mistake, run it, fix it once, run again, finish."""
    return [
        {
            "tool": "terminal",
            "args": {"command": "pwd && ls -la"},
            "thought": "Let me look at the workspace first.",
        },
        {
            "tool": "file_editor",
            "args": {"command": "create", "path": "fizzbuzz.py", "file_text": _DEMO_BUGGY},
            "thought": "I'll write a small FizzBuzz program.",
        },
        {"tool": "terminal", "args": {"command": "python3 fizzbuzz.py"}, "thought": "Now run it."},
        {
            "tool": "file_editor",
            "args": {
                "command": "str_replace",
                "path": "fizzbuzz.py",
                "old_str": "fizz_buzz(i)",
                "new_str": "fizzbuzz(i)",
            },
            "thought": "The call uses the wrong name; fix it.",
        },
        {
            "tool": "terminal",
            "args": {"command": "python3 fizzbuzz.py"},
            "thought": "Run it again to check the fix.",
        },
        {
            "tool": "finish",
            "args": {
                "message": "I wrote fizzbuzz.py, found and fixed a NameError, and it now "
                f"prints FizzBuzz for 1..15. (You asked: {prompt[:200]})"
            },
        },
    ]


def _first_user_text(messages: list[dict[str, Any]]) -> str:
    for message in messages:
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # multi-part content
                return "".join(part.get("text", "") for part in content if isinstance(part, dict))
            return content or ""
    return ""


def _script_object(text: str) -> dict[str, Any] | None:
    """The script object a prompt starts with. Text may follow it: a workflow's reduce and
    pipeline steps append their inputs to the prompt they were given, and their children still
    play it; a summarising request appends the history to summarise."""
    try:
        data, _ = json.JSONDecoder().raw_decode(text.lstrip())
    except (TypeError, ValueError):
        return None
    if isinstance(data, dict) and isinstance(data.get("script"), list):
        return data
    return None


def _parse_script(text: str) -> list[dict[str, Any]] | None:
    data = _script_object(text)
    return data["script"] if data is not None else None


_OWN_CALL_ID = re.compile(r"call_(\d+)_\d+")


def _played(messages: list[dict[str, Any]]) -> int:
    """Turns played so far: assistant messages, or one past the latest own call id when a
    condensation forgot earlier turns."""
    played = sum(1 for m in messages if m.get("role") == "assistant")
    for message in messages:
        ids = [c.get("id") for c in message.get("tool_calls") or []]
        ids.append(message.get("tool_call_id"))
        for call_id in ids:
            if isinstance(call_id, str) and (match := _OWN_CALL_ID.fullmatch(call_id)):
                played = max(played, int(match.group(1)) + 1)
    return played


def _summary(prompt: str) -> dict[str, Any]:
    data = _script_object(prompt) or {}
    summary = data.get("summary", NO_SUMMARY)
    if isinstance(summary, dict):
        return {"fail": str(summary.get("error", "summary failed"))}
    return {"say": str(summary)}


def _prompt_tokens(messages: list[dict[str, Any]]) -> int:
    return sum(len(str(m.get("content") or "")) for m in messages) // 4


def _title(model: str, prompt: str) -> str:
    """The answer to a title request: the script's "title", if it gives one."""
    if model.endswith("demo"):
        return DEMO_TITLE
    try:
        data = json.loads(prompt)
    except (TypeError, ValueError):
        data = None
    title = data.get("title") if isinstance(data, dict) else None
    return title if isinstance(title, str) else NO_TITLE


def next_turn(model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The turn to play for this request."""
    prompt = _first_user_text(messages)
    if messages and messages[0].get("content") == TITLE_INSTRUCTION:
        return {"say": _title(model, prompt)}
    if messages and messages[0].get("content") == SUMMARY_INSTRUCTION:
        return _summary(prompt)
    script = demo_script(prompt) if model.endswith("demo") else _parse_script(prompt)
    if script is None:
        return {"say": NOT_A_SCRIPT}
    window = (_script_object(prompt) or {}).get("context_window")
    if isinstance(window, int) and _prompt_tokens(messages) > window:
        return {"context_window": window}
    played = _played(messages)
    if played < len(script):
        return script[played]
    if model.endswith("demo"):
        return {"say": DEMO_DONE}
    return {"tool": "finish", "args": {"message": "The script is finished."}}


def tool_arguments(args: Any) -> str:
    # Arguments pass through verbatim when they are a string, so tests can send broken JSON.
    return args if isinstance(args, str) else json.dumps(args)


def turn_calls(turn: dict[str, Any]) -> list[tuple[str, Any]]:
    """The (tool, args) pairs a turn calls, in order; empty for a plain message."""
    if "tools" in turn:
        return [(c.get("tool", ""), c.get("args", {})) for c in turn["tools"]]
    if "tool" in turn:
        return [(turn["tool"], turn.get("args", {}))]
    return []


def calls_a_tool(turn: dict[str, Any]) -> bool:
    """A tool turn (its "thought" is the message's text), not a plain message ("say")."""
    return "tools" in turn or "tool" in turn


def turn_usage(messages: list[dict[str, Any]], turn: dict[str, Any]) -> tuple[int, int]:
    """(prompt, completion) tokens, as characters / 4."""
    prompt_chars = sum(len(str(m.get("content") or "")) for m in messages)
    return prompt_chars // 4, len(json.dumps(turn)) // 4


def context_window_message(window: int) -> str:
    return f"This model's maximum context length is {window} tokens."


class ScriptedClient:
    """An LLMClient playing the scripted or demo model in this process: what LiteLLM's path
    (scripted_litellm) answers, and the same LLMError codes and messages, without LiteLLM."""

    def __init__(self, profile: ModelProfile) -> None:
        self.profile = profile

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> LLMResponse:
        model = self.profile.model
        turn = next_turn(model, messages)
        call_no = _played(messages)
        if "context_window" in turn:
            # LiteLLM files its context-window errors under a bad request, and says so.
            refusal = f"litellm.BadRequestError: {context_window_message(turn['context_window'])}"
            raise ContextWindowError(
                CONTEXT_WINDOW_EXCEEDED, _as_litellm_error("ContextWindowExceededError", refusal)
            )
        if "fail" in turn:
            raise LLMError(
                "llm_BadRequestError_400", _as_litellm_error("BadRequestError", turn["fail"])
            )
        calls = [
            ToolCall(id=f"call_{call_no}_{i}", name=tool, arguments=tool_arguments(args))
            for i, (tool, args) in enumerate(turn_calls(turn))
        ]
        content = turn.get("thought") if calls_a_tool(turn) else str(turn.get("say", ""))
        prompt_tokens, completion_tokens = turn_usage(messages, turn)
        return LLMResponse(
            id=f"scripted-{call_no}",
            content=content,
            tool_calls=calls,
            usage=Usage(
                prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost_usd=0.0
            ),
        )


def _as_litellm_error(name: str, message: str) -> str:
    """The message orchestration.step.llm makes of the error LiteLLM raises for this turn."""
    return f"{name} (HTTP 400): litellm.{name}: {message}"[:2000]
