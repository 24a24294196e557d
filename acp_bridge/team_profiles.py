"""A team's own ACP agent profiles (teams.models.AcpAgentProfile): every member lists them,
since conversations start by these names; only admins and owners add, change and delete them,
audited ("acp_agent.created", "acp_agent.updated", "acp_agent.deleted").

The value rules are acp_bridge.profiles' (the same as for the site's CANVAS_ACP_AGENTS), so a
profile means the same wherever it was written. What only the team knows is checked here: a
secret a profile names must exist in the team when the profile is saved. A secret deleted
later is the bridge's to meet (an error event naming it). A literal `env` value is shown to
every member, so one holding a team secret's value is refused (teams.secret_literals); secret
values are read for that comparison only. The audit log and every error hold names only, and
a literal environment value is never quoted in an error (someone may have pasted a key where
a reference belongs).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from django.db import IntegrityError, transaction

from common.errors import Conflict, InvalidInput, NotFound
from teams.audit import audit_record
from teams.models import AcpAgentProfile, Team
from teams.permissions import require_admin
from teams.secret_literals import literals_hold_no_secret
from teams.secrets import secrets_required

from .profiles import (
    DEFAULT_IDLE_TIMEOUT_SECONDS,
    DEFAULT_TURN_TIMEOUT_SECONDS,
    PRESETS,
    AcpProfile,
    AcpProfileValueError,
    SecretRef,
    Source,
    UnknownAcpProfileError,
    acp_profile_get,
    acp_profiles_for,
    clean_args,
    clean_command,
    clean_env,
    clean_mode,
    clean_name,
    clean_secrets,
    clean_timeout,
    site_profiles,
    team_default_network,
    team_network,
    team_readonly,
)

FIELDS = (
    "command", "args", "env", "allowed_secrets", "default_mode", "idle_timeout_seconds",
    "turn_timeout_seconds", "readonly", "network",
)  # fmt: skip
"""What an update may change; the name stays (conversations record it as their agent)."""


_require_admin = partial(require_admin, what="manage ACP agent profiles")


class AcpFieldError(InvalidInput):
    """One field's value is refused; `field` names it (the API answers it as a field error,
    the page puts it under that field)."""

    def __init__(self, detail: str, *, field: str) -> None:
        super().__init__(detail)
        self.field = field


def _check_secrets(team: Team, cleaned: dict[str, Any]) -> None:
    """Every secret named exists; no literal holds a secret's value."""
    wanted = {}
    literals: dict[str, str] = {}
    for key, value in cleaned.get("env", {}).items():
        if isinstance(value, dict):
            wanted.setdefault(value["secret"], f"env {key}")
        else:
            literals[f"env {key}"] = value
    for name in cleaned.get("allowed_secrets", ()):
        wanted.setdefault(name, "allowed_secrets")
    secrets_required(team, wanted)
    literals_hold_no_secret(team, literals, what="ACP agent profile")


def _clean(team: Team, fields: dict[str, Any]) -> dict[str, Any]:
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise InvalidInput(f"unknown ACP agent fields: {', '.join(sorted(unknown))}.")
    cleaners = {
        "command": clean_command,
        "args": lambda value: list(clean_args(value)),
        "env": lambda value: {
            key: item.to_json() if isinstance(item, SecretRef) else item
            for key, item in clean_env(value).items()
        },
        "allowed_secrets": lambda value: list(clean_secrets(value)),
        "default_mode": lambda value: clean_mode(value) or "",
        "idle_timeout_seconds": lambda value: clean_timeout(value, "idle_timeout_seconds"),
        "turn_timeout_seconds": lambda value: clean_timeout(value, "turn_timeout_seconds"),
        # Bounded by the site: CANVAS_ACP_TEAM_READONLY_PATHS, CANVAS_ACP_TEAM_NETWORKS.
        "readonly": lambda value: list(team_readonly(value)),
        "network": lambda value: team_network(team_default_network() if value is None else value),
    }
    cleaned = {}
    for key, value in fields.items():
        try:
            cleaned[key] = cleaners[key](value)
        except AcpProfileValueError as exc:
            raise AcpFieldError(str(exc), field=key) from None
    _check_secrets(team, cleaned)
    return cleaned


def _describe(profile: AcpAgentProfile) -> dict[str, Any]:
    """What the audit log keeps: literals as typed (they are not secret) and secret names."""
    return {"name": profile.name, **{key: getattr(profile, key) for key in FIELDS}}


def _get(team: Team, name: str, *, lock: bool = False) -> AcpAgentProfile:
    rows = AcpAgentProfile.objects.select_for_update() if lock else AcpAgentProfile.objects
    profile = rows.filter(team=team, name=name).first()
    if profile is None:
        raise NotFound(f"the team has no ACP agent profile of its own named {name!r}.")
    return profile


def acp_agent_list(*, team: Team) -> list[AcpAgentProfile]:
    """The team's own profiles by name; the caller has checked that its user is a member."""
    return list(AcpAgentProfile.objects.filter(team=team).order_by("name"))


def acp_agent_get(*, team: Team, name: str) -> AcpAgentProfile:
    """One of the team's own profiles (NotFound otherwise); the caller has checked membership."""
    return _get(team, name)


def acp_agent_create(
    *, by, team: Team, name: str, command: str, args: list[str] | None = None,
    env: dict[str, Any] | None = None, allowed_secrets: list[str] | None = None,
    default_mode: str | None = None,
    idle_timeout_seconds: int = DEFAULT_IDLE_TIMEOUT_SECONDS,
    turn_timeout_seconds: int = DEFAULT_TURN_TIMEOUT_SECONDS,
    readonly: list[str] | None = None, network: str | None = None,
) -> AcpAgentProfile:  # fmt: skip
    """Add a profile; its name is unique within the team (Conflict otherwise). It may reuse a
    preset's or the site's name: for this team it then replaces that one. `network` None: the
    guarded internet ("outbound") where the site lets teams grant it, else none; `readonly`
    and `network` are refused (naming the field) beyond what the site lets teams grant."""
    _require_admin(by, team)
    try:
        name = clean_name(name)
    except AcpProfileValueError as exc:
        raise AcpFieldError(str(exc), field="name") from None
    cleaned = _clean(
        team,
        {
            "command": command, "args": args, "env": env, "allowed_secrets": allowed_secrets,
            "default_mode": default_mode, "idle_timeout_seconds": idle_timeout_seconds,
            "turn_timeout_seconds": turn_timeout_seconds, "readonly": readonly,
            "network": network,
        },
    )  # fmt: skip
    with transaction.atomic():
        try:
            with transaction.atomic():
                profile = AcpAgentProfile.objects.create(team=team, name=name, **cleaned)
        except IntegrityError:
            raise Conflict(f"an ACP agent profile named {name!r} already exists.") from None
        audit_record(
            actor=by, kind="acp_agent.created", team=team, target=name, data=_describe(profile)
        )
    return profile


def acp_agent_update(*, by, team: Team, name: str, **fields: Any) -> AcpAgentProfile:
    """Change some of a profile's fields (FIELDS); the name stays. A live agent process keeps
    what it was spawned with; the next one gets the new values."""
    _require_admin(by, team)
    cleaned = _clean(team, fields)
    with transaction.atomic():
        profile = _get(team, name, lock=True)
        before = _describe(profile)
        for key, value in cleaned.items():
            setattr(profile, key, value)
        profile.save()
        audit_record(
            actor=by, kind="acp_agent.updated", team=team, target=name,
            data={"before": before, "after": _describe(profile)},
        )  # fmt: skip
    return profile


def acp_agent_delete(*, by, team: Team, name: str) -> None:
    """Remove a profile. The name then means the site's or the preset's profile of that name,
    if there is one; conversations naming it resolve it afresh at their next turn."""
    _require_admin(by, team)
    with transaction.atomic():
        profile = _get(team, name, lock=True)
        data = _describe(profile)
        profile.delete()
        audit_record(actor=by, kind="acp_agent.deleted", team=team, target=name, data=data)


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One name the team can start a conversation with, as the settings page and the API
    list it: the profile it resolves to, the team's row when it is the team's own (for its
    timestamps and edit form), and which read-only profile that row replaces, if any."""

    profile: AcpProfile
    row: AcpAgentProfile | None = None
    replaces: Source | None = None

    @property
    def read_only(self) -> bool:
        return self.row is None


def _entry(profile: AcpProfile, rows: dict[str, AcpAgentProfile]) -> CatalogEntry:
    row = rows.get(profile.name)
    if row is None:
        return CatalogEntry(profile)
    shadowed = "site" if profile.name in site_profiles() else None
    shadowed = shadowed or ("preset" if profile.name in PRESETS else None)
    return CatalogEntry(profile, row, shadowed)


def acp_agent_catalog(*, team: Team) -> list[CatalogEntry]:
    """Every profile the team can name, by name (acp_bridge.profiles.acp_profiles_for), with
    its own rows attached; the caller has checked membership."""
    rows = {row.name: row for row in acp_agent_list(team=team)}
    return [_entry(profile, rows) for profile in acp_profiles_for(team.pk)]


def acp_agent_entry(*, team: Team, name: str) -> CatalogEntry:
    """The profile `name` means for the team (NotFound naming the ones there are)."""
    try:
        profile = acp_profile_get(name, team.pk)
    except UnknownAcpProfileError as exc:
        raise NotFound(str(exc)) from None
    rows = {} if profile.source != "team" else {name: _get(team, name)}
    return _entry(profile, rows)
