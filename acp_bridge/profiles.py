"""ACP agent profiles: a name a person picks, mapped to the external agent's command line, its
environment and its limits. The bridge spawns `command *args` in the conversation's workspace.

Three sources, looked up in this order: a team's own rows (teams.models.AcpAgentProfile,
managed by acp_bridge.team_profiles), the site's CANVAS_ACP_AGENTS (JSON, parsed and checked
once at startup by canvas/settings.py through `site_profiles_parse`), then the presets below.
A team row may reuse a site or preset name to replace it for that team.

An environment value is either a literal (non-secret text, stored as written) or a
`SecretRef`: the *name* of a team secret whose value is read on the worker when the process is
spawned. A profile never holds a secret value, so one can be logged, listed by the API and
audited as it is. `secrets` names further team secrets the process may see under their own
names (when the team has them), e.g. a preset's ANTHROPIC_API_KEY.

Pure: no ORM at import (the team lookup imports it lazily), so the settings module and the
bridge process can use this without Django apps loaded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from workspaces.mounts import refusal, under

Network = Literal["none", "outbound", "host"]
NETWORKS: tuple[Network, ...] = ("none", "outbound", "host")
TEAM_NETWORKS_SETTING = "CANVAS_ACP_TEAM_NETWORKS"
TEAM_READONLY_SETTING = "CANVAS_ACP_TEAM_READONLY_PATHS"

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
"""Like a model profile name, without '/' and ':': the name is a URL segment
(/api/teams/{id}/acp-agents/{name}) and follows 'acp:' in a policy's allowed_agent_kinds."""
COMMAND = re.compile(r"^(?:[A-Za-z0-9_][A-Za-z0-9_.+-]*|/[A-Za-z0-9_.+@/-]+)$")
"""A bare program name (found on the worker's PATH) or an absolute path; never a shell line.
A path may hold '@': npm's scoped packages (node_modules/@scope/name-linux-x64/bin/...)."""
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
SECRET_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}$")
"""teams.secrets' own rule, repeated so this module stays free of the ORM."""
MODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
MAX_COMMAND_CHARS = 255
MAX_ARGS = 64
MAX_ARG_CHARS = 4096
MAX_ENV = 64
MAX_ENV_VALUE_CHARS = 4096
MAX_SECRETS = 64
MIN_TIMEOUT_SECONDS = 1
MAX_TIMEOUT_SECONDS = 86_400
DEFAULT_IDLE_TIMEOUT_SECONDS = 300
DEFAULT_TURN_TIMEOUT_SECONDS = 1800
SITE_SETTING = "CANVAS_ACP_AGENTS"
SITE_FIELDS = frozenset(
    {"command", "args", "env", "secrets", "default_mode", "idle_timeout_seconds",
     "turn_timeout_seconds", "readonly", "network"}
)  # fmt: skip
MAX_READONLY = 16

Source = Literal["preset", "site", "team"]


class UnknownAcpProfileError(LookupError):
    """No profile of that name for the team; the message lists the names there are."""


class AcpProfileValueError(ValueError):
    """One value of a profile is malformed; the message names the field, never a literal
    environment value (it may be a key someone pasted)."""


@dataclass(frozen=True, slots=True)
class SecretRef:
    """An environment value taken from the team secret `secret` when the agent is spawned."""

    secret: str

    def to_json(self) -> dict[str, str]:
        return {"secret": self.secret}


EnvValue = str | SecretRef


@dataclass(frozen=True, slots=True)
class AcpProfile:
    """What the bridge needs to spawn and bound one external agent; safe to log and show,
    since it holds secret names only."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, EnvValue] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    """NAME -> literal text or SecretRef; read-only (a MappingProxyType)."""
    secrets: tuple[str, ...] = ()
    """Team secrets the process may see under their own names, when the team has them."""
    default_mode: str | None = None
    """The ACP session mode set after session/new (e.g. "default", "plan"); None: the agent's."""
    idle_timeout_seconds: int = DEFAULT_IDLE_TIMEOUT_SECONDS
    """A process kept alive between turns is reaped after this long without one."""
    turn_timeout_seconds: int = DEFAULT_TURN_TIMEOUT_SECONDS
    """A turn running longer ends with an error event and its process group is killed."""
    team_id: int | None = None
    """Set for a team's own profile: whose secrets its references name."""
    source: Source = "preset"
    readonly: tuple[str, ...] = ()
    """Host paths the sandboxed agent sees read-only (its installation, its interpreter);
    never one the sandbox refuses (workspaces.mounts). A team's row may name only paths inside
    the site's CANVAS_ACP_TEAM_READONLY_PATHS (`team_readonly`), checked when saved and again
    at every launch; its PATH adds none."""
    network: Network = "none"
    """"outbound": the public internet through the outbound guard (workspaces.egress), where
    the agent reaches its model's API; "host": the host's network, loopback included, only
    where the site allows it (workspaces.sandbox.effective_network); a team's row only what
    CANVAS_ACP_TEAM_NETWORKS allows. The team's policy must allow a network at all."""

    @property
    def secret_names(self) -> tuple[str, ...]:
        """Every team secret the spawned process may receive (references and `secrets`): what
        the bridge loads, and redacts from everything it records."""
        refs = [value.secret for value in self.env.values() if isinstance(value, SecretRef)]
        return tuple(dict.fromkeys([*refs, *self.secrets]))

    def env_json(self) -> dict[str, str | dict[str, str]]:
        """The environment as stored and shown: literals as text, references as {"secret"}."""
        return {
            key: value.to_json() if isinstance(value, SecretRef) else value
            for key, value in self.env.items()
        }


def _frozen_env(env: Mapping[str, EnvValue] | None = None) -> Mapping[str, EnvValue]:
    return MappingProxyType(dict(env or {}))


PRESETS: dict[str, AcpProfile] = {
    profile.name: profile
    for profile in (
        AcpProfile(
            name="claude-code",
            command="claude-agent-acp",
            secrets=("ANTHROPIC_API_KEY",),
            network="outbound",
        ),
        AcpProfile(
            name="codex",
            command="codex-acp",
            secrets=("OPENAI_API_KEY", "CODEX_API_KEY"),
            network="outbound",
        ),
        AcpProfile(
            name="gemini",
            command="gemini",
            args=("--acp",),
            secrets=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
            network="outbound",
        ),  # fmt: skip
    )
}
"""The agents most teams have: their ACP command and the key each reads, if the team has it."""


# ---- value rules, shared by the site setting and acp_bridge.team_profiles ----


def _text(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise AcpProfileValueError(f"{what} must be text.")
    if "\x00" in value:
        raise AcpProfileValueError(f"{what} must not contain NUL characters.")
    if len(value) > limit:
        raise AcpProfileValueError(f"{what} is longer than {limit} characters.")
    return value


def clean_name(value: Any) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise AcpProfileValueError(
            "an ACP agent name is 1 to 64 letters, digits, '_', '.' or '-', starting with a "
            "letter or digit."
        )
    return value


def clean_command(value: Any) -> str:
    value = _text(value, "command", MAX_COMMAND_CHARS).strip()
    if not COMMAND.fullmatch(value) or "/../" in f"{value}/":
        raise AcpProfileValueError(
            "command must be a program name (e.g. claude-agent-acp) or an absolute path, with "
            "no spaces or shell characters; put arguments in args."
        )
    return value


def clean_args(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise AcpProfileValueError("args must be a list of strings.")
    if len(value) > MAX_ARGS:
        raise AcpProfileValueError(f"args has more than {MAX_ARGS} entries.")
    return tuple(
        _text(arg, f"args entry {index}", MAX_ARG_CHARS) for index, arg in enumerate(value, 1)
    )


def clean_secret_name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not SECRET_NAME.fullmatch(value):
        raise AcpProfileValueError(
            f"{what} must be a team secret name: upper-case letters, digits and _ (e.g. API_KEY)."
        )
    return value


def clean_env(value: Any) -> dict[str, EnvValue]:
    """NAME -> text or {"secret": NAME}. Errors name the variable, never its value."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise AcpProfileValueError('env must be an object of NAME: text or {"secret": NAME}.')
    if len(value) > MAX_ENV:
        raise AcpProfileValueError(f"env has more than {MAX_ENV} variables.")
    cleaned: dict[str, EnvValue] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not ENV_NAME.fullmatch(key):
            raise AcpProfileValueError(
                "env names are environment variable names: letters, digits and _, not starting "
                "with a digit, at most 64 characters."
            )
        if isinstance(item, Mapping):
            if set(item) != {"secret"}:
                raise AcpProfileValueError(
                    f'env {key}: a reference is {{"secret": NAME}} and nothing else.'
                )
            cleaned[key] = SecretRef(clean_secret_name(item["secret"], f"env {key}'s secret"))
        elif isinstance(item, str):
            # Checked without quoting: a literal may be a key pasted where a reference belongs.
            if "\x00" in item or len(item) > MAX_ENV_VALUE_CHARS:
                raise AcpProfileValueError(
                    f"env {key}: a value is at most {MAX_ENV_VALUE_CHARS} characters, with no NUL."
                )
            cleaned[key] = item
        else:
            raise AcpProfileValueError(f'env {key}: a value is text or {{"secret": NAME}}.')
    return cleaned


def clean_secrets(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise AcpProfileValueError("secrets must be a list of team secret names.")
    if len(value) > MAX_SECRETS:
        raise AcpProfileValueError(f"secrets lists more than {MAX_SECRETS} names.")
    names = [clean_secret_name(name, f"secrets entry {i}") for i, name in enumerate(value, 1)]
    return tuple(dict.fromkeys(names))


def clean_mode(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not MODE.fullmatch(value):
        raise AcpProfileValueError(
            "default_mode must be a mode id of at most 64 letters, digits, '_', '.', ':' or '-'."
        )
    return value


def clean_timeout(value: Any, what: str) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not MIN_TIMEOUT_SECONDS <= value <= MAX_TIMEOUT_SECONDS
    ):
        raise AcpProfileValueError(
            f"{what} must be a whole number of seconds from {MIN_TIMEOUT_SECONDS} to "
            f"{MAX_TIMEOUT_SECONDS}."
        )
    return value


# ---- the site setting ----


def clean_readonly(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple) or len(value) > MAX_READONLY:
        raise AcpProfileValueError(f'"readonly" must be a list of at most {MAX_READONLY} paths.')
    paths = []
    for item in value:
        text = _text(item, '"readonly" path', MAX_ARG_CHARS)
        if not text.startswith("/") or ".." in text.split("/"):
            raise AcpProfileValueError(
                f"\"readonly\" path {text!r} must be absolute, without '..'."
            )
        why = refusal(text)
        if why:  # the sandbox would refuse it at every launch: say so now
            raise AcpProfileValueError(
                f'"readonly" path {text!r} cannot be shown to an agent: {why}.'
            )
        paths.append(text)
    return tuple(paths)


def clean_network(value: Any) -> Network:
    if value is None:
        return "none"
    if value in NETWORKS:
        return value
    raise AcpProfileValueError('"network" must be "none", "outbound" or "host".')


# ---- what a team's own profile may grant: bounded by the site ----


def team_grants_check(networks: list[str], roots: list[str]) -> None:
    """CANVAS_ACP_TEAM_NETWORKS and CANVAS_ACP_TEAM_READONLY_PATHS, at startup: an unknown
    network or a folder no sandbox may mount stops the server, naming the setting."""
    from django.core.exceptions import ImproperlyConfigured

    unknown = [name for name in networks if name not in NETWORKS]
    if unknown:
        raise ImproperlyConfigured(
            f"{TEAM_NETWORKS_SETTING}: unknown network(s) {', '.join(unknown)}; each is one "
            f"of {', '.join(NETWORKS)}."
        )
    refused = [f"{root}: {why}" for root in roots if (why := refusal(root))]
    if refused:
        raise ImproperlyConfigured(f"{TEAM_READONLY_SETTING}: " + "; ".join(refused))


def team_networks() -> tuple[str, ...]:
    from django.conf import settings

    return tuple(getattr(settings, TEAM_NETWORKS_SETTING, ("none", "outbound")))


def team_readonly_roots() -> tuple[str, ...]:
    from django.conf import settings

    return tuple(getattr(settings, TEAM_READONLY_SETTING, ()) or ())


def team_default_network() -> Network:
    """A new team profile's network when none is given: the guarded internet where allowed."""
    return "outbound" if "outbound" in team_networks() else "none"


def team_network(value: Any) -> Network:
    """A network a team's profile may grant; the error names the field and the setting."""
    network = clean_network(value)
    allowed = team_networks()
    if network not in allowed:
        raise AcpProfileValueError(
            f'"network" {network!r} is not one a team may choose on this site; '
            f"{TEAM_NETWORKS_SETTING} allows {', '.join(allowed) or 'none'}."
        )
    return network


def team_readonly(value: Any) -> tuple[str, ...]:
    """Paths a team's profile may show its agent: the sandbox's rules (clean_readonly), and
    each inside a folder of CANVAS_ACP_TEAM_READONLY_PATHS as written and once resolved (a
    link out of those folders is refused)."""
    import os

    paths = clean_readonly(value)
    roots = team_readonly_roots()
    for path in paths:
        real = os.path.realpath(path)
        if not any(
            under(os.path.normpath(path), root) and under(real, os.path.realpath(root))
            for root in roots
        ):
            where = f"inside {', '.join(roots)}" if roots else "none (the site names no folder)"
            raise AcpProfileValueError(
                f'"readonly" path {path!r} is not one a team may show an agent: '
                f"{TEAM_READONLY_SETTING} allows paths {where}."
            )
    return paths


def granted(profile: AcpProfile) -> tuple[tuple[str, ...], Network]:
    """(readonly, network) the profile gets at launch: a team's judged again against the
    site's bounds as they are now (AcpProfileValueError naming the field if no longer
    allowed); the site's and the presets' as written."""
    if profile.source != "team":
        return profile.readonly, profile.network
    return team_readonly(list(profile.readonly)), team_network(profile.network)


def _site_profile(name: str, spec: Any) -> AcpProfile:
    if not isinstance(spec, Mapping):
        raise AcpProfileValueError('its value must be an object with at least "command".')
    unknown = set(spec) - SITE_FIELDS
    if unknown:
        raise AcpProfileValueError(f"unknown fields: {', '.join(sorted(map(str, unknown)))}.")
    if "command" not in spec:
        raise AcpProfileValueError('"command" is missing.')
    return AcpProfile(
        name=clean_name(name),
        command=clean_command(spec["command"]),
        args=clean_args(spec.get("args")),
        env=_frozen_env(clean_env(spec.get("env"))),
        secrets=clean_secrets(spec.get("secrets")),
        default_mode=clean_mode(spec.get("default_mode")),
        idle_timeout_seconds=clean_timeout(
            spec.get("idle_timeout_seconds", DEFAULT_IDLE_TIMEOUT_SECONDS), "idle_timeout_seconds"
        ),
        turn_timeout_seconds=clean_timeout(
            spec.get("turn_timeout_seconds", DEFAULT_TURN_TIMEOUT_SECONDS), "turn_timeout_seconds"
        ),
        source="site",
        readonly=clean_readonly(spec.get("readonly")),
        network=clean_network(spec.get("network")),
    )


def site_profiles_parse(raw: str | Mapping[str, Any] | None) -> dict[str, AcpProfile]:
    """CANVAS_ACP_AGENTS (its JSON text, or the object it holds) as profiles by name. Raises
    django's ImproperlyConfigured naming the setting and the offending key, so a typo stops
    the server at startup rather than a conversation later."""
    from django.core.exceptions import ImproperlyConfigured

    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ImproperlyConfigured(f"{SITE_SETTING} is not valid JSON: {exc}.") from None
    if not isinstance(raw, Mapping):
        raise ImproperlyConfigured(
            f'{SITE_SETTING} must be a JSON object {{"NAME": {{"command": ..., "args": [...], '
            f'"env": {{...}}}}}}.'
        )
    profiles = {}
    for name, spec in raw.items():
        try:
            profiles[name] = _site_profile(name, spec)
        except AcpProfileValueError as exc:
            raise ImproperlyConfigured(f"{SITE_SETTING}[{name!r}]: {exc}") from None
    return profiles


def site_profiles() -> dict[str, AcpProfile]:
    """The site's profiles from settings.CANVAS_ACP_AGENTS (already checked at startup)."""
    from django.conf import settings

    return site_profiles_parse(getattr(settings, SITE_SETTING, None))


# ---- lookups ----


def profile_from_row(row: Any) -> AcpProfile:
    """A teams.models.AcpAgentProfile row as a profile (its values were checked when saved)."""
    env = {
        key: SecretRef(value["secret"]) if isinstance(value, Mapping) else value
        for key, value in (row.env or {}).items()
    }
    return AcpProfile(
        name=row.name,
        command=row.command,
        args=tuple(row.args or ()),
        env=_frozen_env(env),
        secrets=tuple(row.allowed_secrets or ()),
        default_mode=row.default_mode or None,
        idle_timeout_seconds=row.idle_timeout_seconds,
        turn_timeout_seconds=row.turn_timeout_seconds,
        team_id=row.team_id,
        source="team",
        readonly=tuple(row.readonly or ()),
        network=row.network if row.network in NETWORKS else "none",
    )


def _team_rows(team_id: int, name: str | None = None) -> list[Any]:
    from teams.models import AcpAgentProfile

    rows = AcpAgentProfile.objects.filter(team_id=team_id)
    if name is not None:
        rows = rows.filter(name=name)
    return list(rows.order_by("name"))


def acp_profiles_for(team_id: int | None) -> tuple[AcpProfile, ...]:
    """Every profile the team can name, by name: its own rows, then site profiles and presets
    it has not replaced. One query."""
    found: dict[str, AcpProfile] = {}
    if team_id is not None:
        found |= {row.name: profile_from_row(row) for row in _team_rows(team_id)}
    for source in (site_profiles(), PRESETS):
        for name, profile in source.items():
            found.setdefault(name, profile)
    return tuple(found[name] for name in sorted(found))


def acp_profile_get(name: str, team_id: int | None = None) -> AcpProfile:
    """The profile `name` means for the team: its own row, else the site's, else a preset.
    UnknownAcpProfileError (a LookupError) names the ones there are."""
    if team_id is not None:
        rows = _team_rows(team_id, name)
        if rows:
            return profile_from_row(rows[0])
    site = site_profiles()
    if name in site:
        return site[name]
    if name in PRESETS:
        return PRESETS[name]
    available = ", ".join(profile.name for profile in acp_profiles_for(team_id))
    raise UnknownAcpProfileError(f"No ACP agent profile named {name!r}. Available: {available}.")
