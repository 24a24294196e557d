"""Deterministic models served through LiteLLM's custom-provider hook.

`canvas/scripted` plays a script given as the first user message; `canvas/demo` plays a
built-in one. A title request (orchestration.title_model) gets the script's "title". Both are stateless: the next turn is derived from how many assistant messages
the request already holds, so any worker can serve any step.
"""

from __future__ import annotations

import json
import time
from typing import Any

from litellm import CustomLLM, ModelResponse
from litellm.types.utils import ChatCompletionMessageToolCall, Choices, Function, Message

from ..titles import TITLE_INSTRUCTION

NOT_A_SCRIPT = (
    "I am the scripted test model. Send a JSON object as the first message, like "
    '{"script": [{"tool": "think", "args": {"thought": "hi"}}, {"say": "done"}]}, '
    "and I will play it turn by turn."
)

DEMO_TITLE = "FizzBuzz, written and fixed"
NO_TITLE = "A scripted run"
"""A title request's answer when the script has no "title"."""

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


def _parse_script(text: str) -> list[dict[str, Any]] | None:
    """The script a prompt starts with. Text may follow it: a workflow's reduce and pipeline
    steps append their inputs to the prompt they were given, and their children still play it."""
    try:
        data, _ = json.JSONDecoder().raw_decode(text.lstrip())
    except (TypeError, ValueError):
        return None
    if isinstance(data, dict) and isinstance(data.get("script"), list):
        return data["script"]
    return None


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
    script = demo_script(prompt) if model.endswith("demo") else _parse_script(prompt)
    if script is None:
        return {"say": NOT_A_SCRIPT}
    played = sum(1 for m in messages if m.get("role") == "assistant")
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
    call_no = sum(1 for m in messages if m.get("role") == "assistant")
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
