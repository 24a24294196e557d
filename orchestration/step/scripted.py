"""Deterministic models served through LiteLLM's custom-provider hook.

`canvas/scripted` plays a script given as the first user message; `canvas/demo` plays a
built-in one. A title request (orchestration.title_model) gets the script's "title". Both are stateless: the next turn is derived from how many assistant messages
the request already holds, so any worker can serve any step. A condensed View holds fewer
assistant messages than turns played, so the count also reads the model's own call ids
(`call_<turn>_<index>`), which a condensation keeps with the latest turns.

Condensation (orchestration.step.condense) is scripted too: a summarising request gets the
script's "summary" (a string, or {"error": message} to fail the call), and a script with
"context_window": N refuses, as a provider would, any turn whose prompt is over N tokens
(characters of content / 4, as its usage counts them). A turn {"fail": message} fails its call.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import litellm
from litellm import CustomLLM, ModelResponse
from litellm.types.utils import ChatCompletionMessageToolCall, Choices, Function, Message

from ..titles import TITLE_INSTRUCTION
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


def _tool_call(index: int, call_no: int, tool: str, args: Any) -> ChatCompletionMessageToolCall:
    # Arguments pass through verbatim when they are a string, so tests can send broken JSON.
    arguments = args if isinstance(args, str) else json.dumps(args)
    return ChatCompletionMessageToolCall(
        id=f"call_{call_no}_{index}",
        type="function",
        function=Function(name=tool, arguments=arguments),
    )


def build_response(model: str, messages: list[dict[str, Any]]) -> ModelResponse:
    turn = next_turn(model, messages)
    call_no = _played(messages)
    if "context_window" in turn:
        raise litellm.ContextWindowExceededError(
            message=f"This model's maximum context length is {turn['context_window']} tokens.",
            model=model,
            llm_provider="canvas",
        )
    if "fail" in turn:
        raise litellm.BadRequestError(message=turn["fail"], model=model, llm_provider="canvas")
    if "tools" in turn:
        calls = [
            _tool_call(i, call_no, c.get("tool", ""), c.get("args", {}))
            for i, c in enumerate(turn["tools"])
        ]
        message = Message(content=turn.get("thought"), tool_calls=calls)
    elif "tool" in turn:
        message = Message(
            content=turn.get("thought"),
            tool_calls=[_tool_call(0, call_no, turn["tool"], turn.get("args", {}))],
        )
    else:
        message = Message(content=str(turn.get("say", "")))
    finish_reason = "tool_calls" if message.tool_calls else "stop"
    prompt_chars = sum(len(str(m.get("content") or "")) for m in messages)
    return ModelResponse(
        id=f"scripted-{call_no}",
        created=int(time.time()),
        model=model,
        choices=[Choices(index=0, message=message, finish_reason=finish_reason)],
        usage={
            "prompt_tokens": prompt_chars // 4,
            "completion_tokens": len(json.dumps(turn)) // 4,
            "total_tokens": prompt_chars // 4 + len(json.dumps(turn)) // 4,
        },
    )


class ScriptedLLM(CustomLLM):
    def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        return build_response(model, messages)

    async def acompletion(
        self, model: str, messages: list, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        return build_response(model, messages)
