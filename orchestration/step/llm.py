"""Models through LiteLLM, behind a small Protocol the loop depends on.

LiteLLM (seconds of CPU and hundreds of MB) is imported on the first call that needs it, not
with this module: the web process, a worker's start, the CLI and the scripted and demo models
(`model_client`) never pay for it; a real provider's call, a profile test or a worker's
background warm-up (canvas.celery) does. Profiles name a LiteLLM model id plus how to reach it.
"""

from __future__ import annotations

import logging
import os
import random
import re
import threading
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from common import netguard
from conversations.events import Usage

from .profiles import SCRIPTED_MODELS, ModelProfile

_configured = threading.Lock()
_ready: ModuleType | None = None


def litellm_module() -> ModuleType:
    """LiteLLM, imported and configured once per process: our scripted models registered as
    its "canvas" custom provider, its debug banner and telemetry off."""
    global _ready
    if _ready is not None:
        return _ready
    with _configured:
        if _ready is None:
            import litellm

            from .scripted_litellm import ScriptedLLM

            litellm.custom_provider_map = [
                *[p for p in litellm.custom_provider_map if p.get("provider") != "canvas"],
                {"provider": "canvas", "custom_handler": ScriptedLLM()},
            ]
            litellm.suppress_debug_info = True
            litellm.telemetry = False
            _ready = litellm
    return _ready


def warm_up() -> None:
    """Import LiteLLM and answer one offline request (the scripted model's through it), so
    what LiteLLM imports only on a first call is paid here: by a worker in the background once
    it is ready (canvas.celery), not by the first step it runs (bench/resume.py)."""
    try:
        litellm_module().completion(
            model="canvas/scripted", messages=[{"role": "user", "content": "warm up"}]
        )
    except Exception:  # noqa: BLE001 - a worker that cannot warm up still works, only slower
        logging.getLogger(__name__).warning("warming LiteLLM up failed", exc_info=True)


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


class ContextWindowError(LLMError):
    """The provider refused the request as longer than the model's context window: a reason
    to condense the View, not to end the run."""


CONTEXT_WINDOW_EXCEEDED = "llm_context_window_exceeded"


class LLMClient(Protocol):
    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> LLMResponse: ...


def model_client(profile: ModelProfile) -> LLMClient:
    """The client for a profile: the scripted and demo models answer in this process without
    LiteLLM (orchestration.step.scripted, the same answers as through it) unless
    CANVAS_SCRIPTED_THROUGH_LITELLM (the test suite) plugs them in behind LiteLLM; every other
    model goes through LiteLLM."""
    from django.conf import settings

    if profile.model in SCRIPTED_MODELS and not settings.CANVAS_SCRIPTED_THROUGH_LITELLM:
        from .scripted import ScriptedClient

        return ScriptedClient(profile)
    return LiteLLMClient(profile)


def _retryable() -> tuple[type[Exception], ...]:
    litellm = litellm_module()
    return (
        netguard.UnresolvableHost,  # our own check's lookup; LiteLLM's would fail the same way
        litellm.RateLimitError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.BadGatewayError,
        litellm.APIConnectionError,
        litellm.Timeout,
    )


MAX_BACKOFF_SECONDS = 20.0


def _retry_after(exc: Exception) -> float | None:
    """The provider's own wait hint (Retry-After / retry-after-ms), when it sent one."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    try:
        if "retry-after-ms" in headers:
            return float(headers["retry-after-ms"]) / 1000
        if "retry-after" in headers:
            return float(headers["retry-after"])
    except (TypeError, ValueError):
        return None
    return None


def backoff_seconds(attempt: int, exc: Exception) -> float:
    hinted = _retry_after(exc)
    if hinted is not None:
        return min(max(hinted, 0.0), MAX_BACKOFF_SECONDS)
    return min(0.5 * 2**attempt, MAX_BACKOFF_SECONDS) * (0.5 + random.random() / 2)


class LiteLLMClient:
    """One door to every provider. Retries are ours, the same for every provider: transient
    failures (429, 5xx, timeouts, connection errors) are retried `num_retries` times with
    backoff that honours the provider's Retry-After; the SDKs' and LiteLLM's own retry
    layers are switched off so a retry is never multiplied."""

    def __init__(self, profile: ModelProfile, *, sleep=time.sleep) -> None:
        self.profile = profile
        self._sleep = sleep

    def _kwargs(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict:
        p = self.profile
        kwargs: dict[str, Any] = {
            "model": p.model,
            "messages": messages,
            "timeout": p.timeout,
            "max_retries": 0,
            **p.extra,
        }
        if tools:
            kwargs["tools"] = tools
        if p.api_base:
            kwargs["api_base"] = p.api_base
        if p.api_key:  # a team profile's key, read from its secret on this worker
            kwargs["api_key"] = p.api_key
        elif p.api_key_env:
            kwargs["api_key"] = os.environ.get(p.api_key_env, "")
        if p.temperature is not None:
            kwargs["temperature"] = p.temperature
        return kwargs

    def _check_api_base(self) -> None:
        """Refuse a team profile's api_base (or the local server its provider defaults to)
        that is, or now resolves to, a private, loopback, link-local or metadata address
        (common.netguard). LiteLLM resolves the name again itself, so this narrows DNS
        rebinding to the moment between the two lookups; it runs before every attempt. A
        site's own profiles (CANVAS_MODEL_PROFILES, CANVAS_LLM_API_BASE) are the operator's
        choice and not checked."""
        p = self.profile
        if p.team_id is None:
            return
        from teams.profiles import effective_api_base  # the ORM: only once Django is set up

        base = effective_api_base(p.model, p.api_base)
        if base is None:
            return
        try:
            netguard.check_url(base, allowed_networks=netguard.site_allowed_networks())
        except netguard.BlockedURL as exc:
            raise LLMError(
                "llm_api_base_refused", f"Model profile {p.name!r}: api_base is refused: {exc}"
            ) from None

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> LLMResponse:
        litellm = litellm_module()
        kwargs = self._kwargs(messages, tools)
        attempts = self.profile.num_retries + 1
        for attempt in range(attempts):
            try:
                self._check_api_base()
                answer = litellm.completion(**kwargs)
            except LLMError:
                raise
            except Exception as exc:
                if isinstance(exc, litellm.ContextWindowExceededError):
                    raise ContextWindowError(CONTEXT_WINDOW_EXCEEDED, _error_message(exc)) from exc
                missing = _missing_key(exc, self.profile.model)
                if missing is not None:  # no retry can help; say what is missing
                    raise LLMError(NO_API_KEY, missing) from None
                if not isinstance(exc, _retryable()):  # not transient: the request itself is wrong
                    raise LLMError(_error_code(exc), _error_message(exc)) from exc
                if attempt + 1 >= attempts:
                    raise LLMError(
                        _error_code(exc), _retried(_error_message(exc), attempt)
                    ) from exc
                self._sleep(backoff_seconds(attempt, exc))
            else:
                try:
                    return _to_response(answer)
                except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
                    message = f"{BAD_RESPONSE_MESSAGE}: {exc}"[:2000]
                    raise LLMError(BAD_RESPONSE, message) from exc
        raise AssertionError("unreachable")


def _retried(message: str, attempt: int) -> str:
    return f"{message} (gave up after {attempt + 1} attempts)" if attempt else message


NO_API_KEY = "llm_no_api_key"
# How LiteLLM and the provider SDKs say no key was given (litellm 1.x): OpenAI's SDK, wrapped
# as a made-up HTTP 500; "Missing Anthropic API Key" (401); "Missing Gemini API key".
_MISSING_KEY = re.compile(
    r"missing credentials|missing [\w .-]{0,40}api[ _]?key|no key is set|"
    r"api_key client option must be set",
    re.IGNORECASE,
)


def _missing_key(exc: Exception, model: str) -> str | None:
    """Words for a call refused because no API key reached the provider, else None."""
    if not _MISSING_KEY.search(str(getattr(exc, "message", None) or exc)):
        return None
    provider = getattr(exc, "llm_provider", None)
    if not provider:
        try:
            provider = litellm_module().get_llm_provider(model)[1]
        except Exception:  # an unknown model: name it instead
            provider = model
    return (
        f"No API key for provider {provider}: give the model profile an API key (a team "
        "secret), or set the provider's key in the workers' environment."
    )


BAD_RESPONSE = "llm_bad_response"
BAD_RESPONSE_MESSAGE = "The model answered with a body that is not a chat completion"
# LiteLLM reports a 2xx answer it cannot parse as a made-up HTTP 500 (InternalServerError);
# these are its words for it (litellm 1.x: convert_dict_to_response, the OpenAI handler).
_BAD_RESPONSE_MARKERS = ("Invalid response object", "LiteLLM: provider returned")


def _is_bad_response(exc: Exception) -> bool:
    return isinstance(exc, litellm_module().InternalServerError) and any(
        marker in str(exc) for marker in _BAD_RESPONSE_MARKERS
    )


def _error_code(exc: Exception) -> str:
    if _is_bad_response(exc):
        return BAD_RESPONSE
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    return f"llm_{name}" + (f"_{status}" if status else "")


def _error_message(exc: Exception) -> str:
    if _is_bad_response(exc):
        return f"{BAD_RESPONSE_MESSAGE}: {getattr(exc, 'message', None) or exc}"[:2000]
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
