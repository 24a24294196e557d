"""Team policies and model profiles. Profiles show the name of the secret holding their API
key, never a key."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema, Status
from pydantic import Field

from common.inputs import Int, Key, MoneyDecimal, Text
from teams import profiles
from teams.models import ModelProfile, Policy
from teams.permissions import Action
from teams.policies import ACP_TOOL_KINDS, EDITABLE, policy_for_team, policy_update
from teams.services import team_get_for
from teams.vocabulary import (
    ConfirmationMode,
    ConfirmationModeName,
    NetworkName,
    RiskLevel,
    RiskName,
)

from . import ERRORS

router = Router(tags=["policies"])


class PolicyIn(Schema):
    """The whole team policy (PUT replaces it); a field left out takes its default."""

    confirmation_mode: ConfirmationModeName = ConfirmationMode.RISKY.value
    risk_threshold: RiskName = RiskLevel.HIGH.name
    allowed_tools: list[Text(100)] = Field(default_factory=list, description="Empty: all tools.")
    allowed_agent_kinds: list[Text(100)] = Field(
        default_factory=list, description="native, acp:NAME; empty: all kinds."
    )
    max_iterations_per_run: int | None = Field(default=None, ge=1, le=10_000)
    max_cost_per_run_usd: MoneyDecimal | None = None
    max_cost_per_month_usd: MoneyDecimal | None = None
    max_concurrent_runs: Int(ge=1) | None = None
    network: NetworkName = Field(
        default="none",
        description=(
            "What the team's sandboxed commands (terminal, hooks) may reach. host: the host's "
            "network, its own services included; refused unless the site allows it "
            "(CANVAS_SANDBOX_ALLOW_HOST_NETWORK)."
        ),
    )
    allowed_workspace_kinds: list[Text(20)] = Field(
        default_factory=list, description="local, docker; empty: all kinds."
    )
    allowed_images: list[Text(255)] = Field(
        default_factory=list,
        description="Docker images; empty: every image the site offers (CANVAS_DOCKER_IMAGES).",
    )
    docker_cpus: float | None = Field(
        default=None, ge=0.01, le=1024, allow_inf_nan=False, description="CPUs per container."
    )
    docker_memory_mb: Int(ge=1) | None = Field(default=None, description="Memory per container.")
    docker_pids: Int(ge=1) | None = Field(default=None, description="Processes per container.")
    subagents_allowed: bool = Field(
        default=True,
        description="May agents spawn sub-agents (task, delegate, workflow)? false forbids it; "
        "true leaves it to the site (CANVAS_SUBAGENTS_ALLOWED).",
    )
    max_subagent_depth: Int(ge=1) | None = Field(
        default=None, description="How deep sub-agents nest; the site caps it (default 3)."
    )
    max_children_per_call: Int(ge=1) | None = Field(
        default=None, description="Children one tool call may spawn; site default 5."
    )
    max_children_per_run: Int(ge=1) | None = Field(
        default=None, description="Children one run may spawn; site default 50."
    )
    max_concurrent_children: Int(ge=1) | None = Field(
        default=None, description="Children of one parent running at once; site default 8."
    )
    acp_auto_allow_kinds: list[Text(20)] = Field(
        default_factory=list,
        description=f"External (ACP) agents' tool kinds whose permission requests are granted "
        f"without asking ({', '.join(ACP_TOOL_KINDS)}). Unlike the lists above, empty grants "
        "none: every request asks a person. Only kinds the site default also grants apply.",
    )
    acp_permission_timeout_seconds: Int(ge=1) | None = Field(
        default=None,
        description="How long a permission request waits for a person before it is answered "
        "as rejected; the site caps it (CANVAS_ACP_PERMISSION_TIMEOUT_SECONDS, default 600).",
    )


class PolicyFields(Schema):
    confirmation_mode: str
    risk_threshold: str
    allowed_tools: list[str] | None
    allowed_agent_kinds: list[str] | None
    max_iterations_per_run: int | None
    max_cost_per_run_usd: float | None
    max_cost_per_month_usd: float | None
    max_concurrent_runs: int | None
    network: str
    allowed_workspace_kinds: list[str] | None
    allowed_images: list[str] | None
    docker_cpus: float | None
    docker_memory_mb: int | None
    docker_pids: int | None
    subagents_allowed: bool
    max_subagent_depth: int | None
    max_children_per_call: int | None
    max_children_per_run: int | None
    max_concurrent_children: int | None
    acp_auto_allow_kinds: list[str]
    acp_permission_timeout_seconds: int | None


class PolicyOut(Schema):
    team: PolicyFields | None
    """The team's own row; null until an admin sets one."""
    effective: PolicyFields
    """What is enforced: the stricter of the site default and the team's row. In allow-lists
    here, null means all and [] means none; acp_auto_allow_kinds is never null."""


class ProfileFields(Schema):
    model: Text(200, min_length=1) = Field(description="LiteLLM model id.")
    api_base: Text(200) = ""
    api_key_secret: Text(64) = Field(
        default="", description="Name of the team secret holding the API key."
    )
    max_input_tokens: Int(ge=1) | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)


class ProfileIn(ProfileFields):
    name: Text(100, min_length=1)


class ProfileOut(ProfileIn):
    pass


def _row(row: Policy | None) -> dict[str, Any] | None:
    if row is None:
        return None
    data = {key: getattr(row, key) for key in EDITABLE}
    return {k: float(v) if isinstance(v, Decimal) else v for k, v in data.items()}


def _policy(team_id: int) -> dict[str, Any]:
    return {
        "team": _row(Policy.objects.filter(team_id=team_id).first()),
        "effective": policy_for_team(team_id).as_dict(),
    }


def _profile(p: ModelProfile) -> dict[str, Any]:
    return {
        "name": p.name,
        "model": p.model,
        "api_base": p.api_base,
        "api_key_secret": p.api_key_secret,
        "max_input_tokens": p.max_input_tokens,
        "temperature": p.temperature,
    }


@router.get("/{team_id}/policy", response={200: PolicyOut, **ERRORS})
def policy_get(request: HttpRequest, team_id: int):
    team = team_get_for(request.user, team_id, Action.VIEW)
    return _policy(team.pk)


@router.put("/{team_id}/policy", response={200: PolicyOut, **ERRORS})
def policy_put(request: HttpRequest, team_id: int, body: PolicyIn):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    policy_update(by=request.user, team=team, **body.model_dump())
    return _policy(team.pk)


@router.get("/{team_id}/profiles", response={200: list[ProfileOut], **ERRORS})
def profile_list(request: HttpRequest, team_id: int):
    team = team_get_for(request.user, team_id, Action.VIEW)
    return [_profile(p) for p in profiles.profile_list(team=team)]


@router.post("/{team_id}/profiles", response={201: ProfileOut, **ERRORS})
def profile_create(request: HttpRequest, team_id: int, body: ProfileIn):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    profile = profiles.profile_create(by=request.user, team=team, **body.model_dump())
    return Status(201, _profile(profile))


@router.put("/{team_id}/profiles/{path:name}", response={200: ProfileOut, **ERRORS})
def profile_update(request: HttpRequest, team_id: int, name: Key, body: ProfileFields):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    profile = profiles.profile_update(by=request.user, team=team, name=name, **body.model_dump())
    return _profile(profile)


@router.delete("/{team_id}/profiles/{path:name}", response={204: None, **ERRORS})
def profile_delete(request: HttpRequest, team_id: int, name: Key):
    team = team_get_for(request.user, team_id, Action.ADMINISTER)
    profiles.profile_delete(by=request.user, team=team, name=name)
    return Status(204, None)
