"""The scripted and demo models as LiteLLM's "canvas" custom provider.

Imported only with LiteLLM (orchestration.step.llm.litellm_module registers `ScriptedLLM`),
so tests and the worker's warm-up can run LiteLLM's own completion path on the scripted
turns (orchestration.step.scripted) without a provider.
"""

from __future__ import annotations

import time
from typing import Any

import litellm
from litellm import CustomLLM, ModelResponse
from litellm.types.utils import ChatCompletionMessageToolCall, Choices, Function, Message

from .scripted import (
    _played,
    calls_a_tool,
    context_window_message,
    next_turn,
    tool_arguments,
    turn_calls,
    turn_usage,
)


def _tool_call(index: int, call_no: int, tool: str, args: Any) -> ChatCompletionMessageToolCall:
    return ChatCompletionMessageToolCall(
        id=f"call_{call_no}_{index}",
        type="function",
        function=Function(name=tool, arguments=tool_arguments(args)),
    )


def build_response(model: str, messages: list[dict[str, Any]]) -> ModelResponse:
    turn = next_turn(model, messages)
    call_no = _played(messages)
    if "context_window" in turn:
        raise litellm.ContextWindowExceededError(
            message=context_window_message(turn["context_window"]),
            model=model,
            llm_provider="canvas",
        )
    if "fail" in turn:
        raise litellm.BadRequestError(message=turn["fail"], model=model, llm_provider="canvas")
    calls = [_tool_call(i, call_no, tool, args) for i, (tool, args) in enumerate(turn_calls(turn))]
    if calls_a_tool(turn):
        message = Message(content=turn.get("thought"), tool_calls=calls)
    else:
        message = Message(content=str(turn.get("say", "")))
    finish_reason = "tool_calls" if message.tool_calls else "stop"
    prompt_tokens, completion_tokens = turn_usage(messages, turn)
    return ModelResponse(
        id=f"scripted-{call_no}",
        created=int(time.time()),
        model=model,
        choices=[Choices(index=0, message=message, finish_reason=finish_reason)],
        usage={
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    )


class ScriptedLLM(CustomLLM):
    def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        return build_response(model, messages)

    async def acompletion(
        self, model: str, messages: list, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        return build_response(model, messages)
