"""Model profiles: a name a person picks, mapped to a LiteLLM model id and how to reach it.

Free of LiteLLM so the web process can validate a profile name without importing it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any


class UnknownProfileError(LookupError):
    pass


@dataclass(frozen=True, slots=True)
class ModelProfile:
    name: str
    model: str
    """LiteLLM model id, e.g. "openai/gpt-4o" or "canvas/scripted"."""
    api_base: str | None = None
    api_key_env: str | None = None
    """Name of the environment variable holding the key; the key itself is never stored."""
    temperature: float | None = None
    timeout: float = 120.0
    num_retries: int = 3
    extra: dict[str, Any] = field(default_factory=dict)


BUILTIN_PROFILES = {
    "scripted": ModelProfile(name="scripted", model="canvas/scripted", num_retries=0),
    "demo": ModelProfile(name="demo", model="canvas/demo", num_retries=0),
}


def profile_get(name: str) -> ModelProfile:
    """A profile by name: built-ins, then CANVAS_MODEL_PROFILES (JSON), then a raw LiteLLM id.

    CANVAS_MODEL_PROFILES maps names to {model, api_base, api_key_env, temperature, timeout,
    num_retries}. A name with a "/" not listed there is used as a LiteLLM model id, reaching
    CANVAS_LLM_API_BASE with the key from CANVAS_LLM_API_KEY when those are set.
    """
    if name in BUILTIN_PROFILES:
        return BUILTIN_PROFILES[name]
    from django.conf import settings

    configured = json.loads(os.environ.get("CANVAS_MODEL_PROFILES") or "{}")
    if name in configured:
        spec = dict(configured[name])
        return ModelProfile(
            name=name,
            model=spec.pop("model"),
            api_base=spec.pop("api_base", None),
            api_key_env=spec.pop("api_key_env", None),
            temperature=spec.pop("temperature", None),
            timeout=float(spec.pop("timeout", settings.CANVAS_LLM_TIMEOUT)),
            num_retries=int(spec.pop("num_retries", settings.CANVAS_LLM_NUM_RETRIES)),
            extra=spec,
        )
    if "/" in name:
        return ModelProfile(
            name=name,
            model=name,
            api_base=os.environ.get("CANVAS_LLM_API_BASE") or None,
            api_key_env="CANVAS_LLM_API_KEY" if os.environ.get("CANVAS_LLM_API_KEY") else None,
            timeout=settings.CANVAS_LLM_TIMEOUT,
            num_retries=settings.CANVAS_LLM_NUM_RETRIES,
        )
    raise UnknownProfileError(f"No model profile named {name!r}.")
