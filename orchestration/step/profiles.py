"""Model profiles: a name a person picks, mapped to a LiteLLM model id and how to reach it.

Free of LiteLLM so the web process can validate a profile name without importing it. A
team's own profiles (teams.models.ModelProfile) come first; their API keys live in team
secrets and are read only on the worker, when the model client is built
(`profile_with_api_key`), so no key passes through the web process, the API or the log.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from typing import Any


class UnknownProfileError(LookupError):
    pass


class ApiKeyError(UnknownProfileError):
    """The team secret holding a profile's key is missing or cannot be decrypted."""


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
    max_input_tokens: int | None = None
    team_id: int | None = None
    """Set for a team's own profile: whose secrets hold its key."""
    api_key_secret: str | None = None
    """Name of the team secret holding the key."""
    api_key: str | None = field(default=None, repr=False, compare=False)
    """The key itself: only ever set on a worker, by `profile_with_api_key`, and kept out of
    reprs so a logged profile cannot leak it."""


SCRIPTED_MODELS = frozenset({"canvas/scripted", "canvas/demo"})
"""Model ids answered by orchestration.step.scripted: no provider, no LiteLLM needed."""

BUILTIN_PROFILES = {
    "scripted": ModelProfile(name="scripted", model="canvas/scripted", num_retries=0),
    "demo": ModelProfile(name="demo", model="canvas/demo", num_retries=0),
}


def _team_profile(name: str, team_id: int) -> ModelProfile | None:
    from django.conf import settings

    from teams.models import ModelProfile as ProfileRow

    row = ProfileRow.objects.filter(team_id=team_id, name=name).first()
    if row is None:
        return None
    return ModelProfile(
        name=row.name,
        model=row.model,
        api_base=row.api_base or None,
        temperature=row.temperature,
        timeout=settings.CANVAS_LLM_TIMEOUT,
        num_retries=settings.CANVAS_LLM_NUM_RETRIES,
        max_input_tokens=row.max_input_tokens,
        team_id=team_id,
        api_key_secret=row.api_key_secret or None,
    )


def profile_with_api_key(profile: ModelProfile) -> ModelProfile:
    """The profile with its key read from the team secret it names. Call on the worker, right
    before building the client; raises ApiKeyError when the secret is gone or unreadable."""
    if profile.team_id is None or not profile.api_key_secret:
        return profile
    from teams.crypto import SecretDecryptionError
    from teams.secrets import secret_values_for_team

    try:
        values = secret_values_for_team(profile.team_id)
    except SecretDecryptionError as exc:  # names the secret, never a value
        raise ApiKeyError(f"Model profile {profile.name!r}: {exc}.") from exc
    value = values.get(profile.api_key_secret)
    if value is None:
        raise ApiKeyError(
            f"Model profile {profile.name!r} takes its API key from the team secret "
            f"{profile.api_key_secret!r}, which does not exist. A team admin can add it."
        )
    return replace(profile, api_key=value)


def site_profile_names() -> list[str]:
    """The names every team may pick without a profile of its own: the built-ins and
    CANVAS_MODEL_PROFILES (an unreadable setting offers none; profile_get says why on use)."""
    try:
        configured = json.loads(os.environ.get("CANVAS_MODEL_PROFILES") or "{}")
    except ValueError:
        configured = {}
    extra = sorted(configured) if isinstance(configured, dict) else []
    return [*BUILTIN_PROFILES, *(name for name in extra if name not in BUILTIN_PROFILES)]


def profile_get(name: str, team_id: int | None = None) -> ModelProfile:
    """A profile by name: the team's own (with `team_id`), built-ins, then
    CANVAS_MODEL_PROFILES (JSON), then a raw LiteLLM id.

    CANVAS_MODEL_PROFILES maps names to {model, api_base, api_key_env, temperature, timeout,
    num_retries, max_input_tokens}. A name with a "/" not listed there is used as a LiteLLM
    model id, reaching CANVAS_LLM_API_BASE with the key from CANVAS_LLM_API_KEY when those are
    set.
    """
    if team_id is not None:
        own = _team_profile(name, team_id)
        if own is not None:
            return own
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
            max_input_tokens=spec.pop("max_input_tokens", None),  # ours, never sent to LiteLLM
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
