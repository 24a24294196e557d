"""Models through LiteLLM, behind a small Protocol the loop depends on.

Importing this module imports LiteLLM (seconds and hundreds of MB): only workers do, the web
process never should. Profiles name a LiteLLM model id plus how to reach it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Protocol

import litellm

from conversations.events import Usage

from .profiles import ModelProfile
from .scripted import ScriptedLLM

litellm.custom_provider_map = [
    *[p for p in litellm.custom_provider_map if p.get("provider") != "canvas"],
    {"provider": "canvas", "custom_handler": ScriptedLLM()},
]
litellm.suppress_debug_info = True
litellm.telemetry = False


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class LLMResponse:
    id: str | None
    content: str | None
    tool_calls: list[ToolCall]
    usage: Usage


class LLMError(Exception):
    """The model could not answer, after LiteLLM's retries."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class LLMClient(Protocol):
    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> LLMResponse: ...


class LiteLLMClient:
    def __init__(self, profile: ModelProfile) -> None:
        self.profile = profile

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> LLMResponse:
        p = self.profile
        kwargs: dict[str, Any] = {
            "model": p.model,
            "messages": messages,
            "timeout": p.timeout,
            # Retries happen in the provider SDK (OpenAI's client: 408/409/429/5xx, timeouts and
            # connection errors, with backoff honouring Retry-After). Passing LiteLLM's
            # `num_retries` instead also arms its wrapper's second retry layer, which needs the
            # optional `tenacity` package: without it the provider's error is replaced by
            # "tenacity import failed", and with it each retry is doubled.
            "max_retries": p.num_retries,
            **p.extra,
        }
        if tools:
            kwargs["tools"] = tools
        if p.api_base:
            kwargs["api_base"] = p.api_base
        if p.api_key_env:
            kwargs["api_key"] = os.environ.get(p.api_key_env, "")
        if p.temperature is not None:
            kwargs["temperature"] = p.temperature
        try:
            response = litellm.completion(**kwargs)
        except Exception as exc:  # LiteLLM maps providers' errors onto its own classes
            raise LLMError(_error_code(exc), _error_message(exc)) from exc
        return _to_response(response)


def _error_code(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    return f"llm_{name}" + (f"_{status}" if status else "")


def _error_message(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    message = str(getattr(exc, "message", None) or exc)
    prefix = f"{type(exc).__name__}" + (f" (HTTP {status})" if status else "")
    return f"{prefix}: {message}"[:2000]


def _to_response(response: Any) -> LLMResponse:
    choice = response.choices[0]
    message = choice.message
    calls = [
        ToolCall(
            id=call.id or f"call_{index}",
            name=(call.function.name or ""),
            arguments=call.function.arguments or "",
        )
        for index, call in enumerate(message.tool_calls or [])
    ]
    usage = getattr(response, "usage", None)
    cost = (getattr(response, "_hidden_params", None) or {}).get("response_cost") or 0.0
    return LLMResponse(
        id=getattr(response, "id", None),
        content=message.content,
        tool_calls=calls,
        usage=Usage(
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost_usd=float(cost),
        ),
    )
