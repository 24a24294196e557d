"""A team's model profiles: named LiteLLM models its conversations can pick.

A profile names the team secret holding its API key, never the key itself; the key is read
from the secret only on the worker that builds the model client (orchestration.step.profiles).
"""

from __future__ import annotations

import math
import re
from functools import partial
from typing import Any

from django.db import IntegrityError, transaction

from common import netguard
from common.errors import Conflict, InvalidInput, NotFound

from .audit import audit_record
from .models import ModelProfile, Secret, Team
from .outbound import outbound_url_check
from .permissions import require_admin

PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,99}$")
FIELDS = ("model", "api_base", "api_key_secret", "max_input_tokens", "temperature")
LOCAL_DEFAULT_BASES = {
    "ollama": "http://localhost:11434",
    "ollama_chat": "http://localhost:11434",
    "llamafile": "http://127.0.0.1:8080/v1",
}
"""LiteLLM providers that, given no api_base, call a server on the worker's own host."""


def effective_api_base(model: str, api_base: str | None) -> str | None:
    """Where a team profile's calls go when that is decided by us or by a local default
    (None: the provider's public endpoint). Checked by common.netguard at save and before
    every call (orchestration.step.llm)."""
    return api_base or LOCAL_DEFAULT_BASES.get(model.split("/", 1)[0].lower())


_require_admin = partial(require_admin, what="manage model profiles")


def _clean_name(name: Any) -> str:
    if not isinstance(name, str) or not PROFILE_NAME.fullmatch(name):
        raise InvalidInput(
            "a profile name is 1-100 letters, digits and _ . : / -, starting with a letter "
            "or digit."
        )
    return name


def _clean(team: Team, fields: dict[str, Any]) -> dict[str, Any]:
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise InvalidInput(f"unknown profile fields: {', '.join(sorted(unknown))}.")
    cleaned: dict[str, Any] = {}
    for key, value in fields.items():
        if key == "model":
            if not isinstance(value, str) or not value.strip() or len(value) > 200:
                raise InvalidInput("model must be a LiteLLM model id of at most 200 characters.")
            cleaned[key] = value.strip()
        elif key == "api_base":
            value = (value or "").strip()
            if value:
                outbound_url_check(value, what="api_base")
            cleaned[key] = value
        elif key == "api_key_secret":
            value = (value or "").strip()
            if value and not Secret.objects.filter(team=team, name=value).exists():
                raise InvalidInput(f"the team has no secret named {value!r}.")
            cleaned[key] = value
        elif key == "max_input_tokens":
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise InvalidInput("max_input_tokens must be a positive whole number or null.")
            cleaned[key] = value
        else:  # temperature
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or not 0 <= value <= 2
            ):
                raise InvalidInput("temperature must be between 0 and 2, or null.")
            cleaned[key] = None if value is None else float(value)
    return cleaned


def _check_default_base(model: str, api_base: str) -> None:
    """A model id whose provider calls the worker's own host without an api_base is held to
    the same rule as an api_base pointing there."""
    base = None if api_base else effective_api_base(model, None)
    if base is None:
        return
    try:
        netguard.check_url_on_save(base, allowed_networks=netguard.site_allowed_networks())
    except netguard.BlockedURL as exc:
        raise InvalidInput(
            f"model {model!r} without an api_base calls {base}, which is refused: {exc}"
        ) from None


def _describe(profile: ModelProfile) -> dict[str, Any]:
    """What the audit log keeps: the secret's name, never a value."""
    return {"name": profile.name, **{key: getattr(profile, key) for key in FIELDS}}


def _get(team: Team, name: str) -> ModelProfile:
    profile = ModelProfile.objects.select_for_update().filter(team=team, name=name).first()
    if profile is None:
        raise NotFound(f"no model profile named {name!r}.")
    return profile


def profile_list(*, team: Team) -> list[ModelProfile]:
    return list(ModelProfile.objects.filter(team=team).order_by("name"))


def profile_create(*, by, team: Team, name: str, model: str, **fields: Any) -> ModelProfile:
    """Add a profile; its name is unique within the team (Conflict otherwise)."""
    _require_admin(by, team)
    name = _clean_name(name)
    cleaned = _clean(team, {"model": model, **fields})
    _check_default_base(cleaned["model"], cleaned.get("api_base", ""))
    with transaction.atomic():
        try:
            with transaction.atomic():
                profile = ModelProfile.objects.create(team=team, name=name, **cleaned)
        except IntegrityError:
            raise Conflict(f"a model profile named {name!r} already exists.") from None
        audit_record(
            actor=by, kind="profile.created", team=team, target=name, data=_describe(profile)
        )
    return profile


def profile_update(*, by, team: Team, name: str, **fields: Any) -> ModelProfile:
    """Change some of a profile's fields (FIELDS); the name stays."""
    _require_admin(by, team)
    cleaned = _clean(team, fields)
    with transaction.atomic():
        profile = _get(team, name)
        before = _describe(profile)
        for key, value in cleaned.items():
            setattr(profile, key, value)
        _check_default_base(profile.model, profile.api_base)
        profile.save()
        audit_record(
            actor=by, kind="profile.updated", team=team, target=name,
            data={"before": before, "after": _describe(profile)},
        )  # fmt: skip
    return profile


def profile_delete(*, by, team: Team, name: str) -> None:
    """Remove a profile. Conversations naming it resolve the name afresh at their next
    slice (built-ins, then environment profiles) or stop with a model error."""
    _require_admin(by, team)
    with transaction.atomic():
        profile = _get(team, name)
        data = _describe(profile)
        profile.delete()
        audit_record(actor=by, kind="profile.deleted", team=team, target=name, data=data)
