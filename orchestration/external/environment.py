"""The environment an external agent is spawned with: its profile's, nothing of the worker's.

Literal values as written; a `SecretRef` as the named team secret's value (an error naming
it when the team has no such secret); the profile's `secrets` under their own names when the
team has them (those it lacks are remembered, to name them if the agent asks to
authenticate). PATH and HOME come from the sandbox and the profile, never from the worker; in a
container the image's own PATH and HOME stand unless the profile sets them. A profile's PATH is
only the agent's environment inside the sandbox: it shows nothing more (the command is found
by orchestration.external.place, in what the sandbox already shows).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from acp_bridge.profiles import AcpProfile, SecretRef

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def agent_path(profile: AcpProfile) -> str:
    """The PATH the agent gets in the sandbox: the profile's, else DEFAULT_PATH (where a
    `#!/usr/bin/env node` agent finds node)."""
    path = profile.env.get("PATH")
    return path if isinstance(path, str) else DEFAULT_PATH


@dataclass(frozen=True)
class AgentEnvironment:
    env: dict[str, str] = field(default_factory=dict, repr=False)
    missing: tuple[str, ...] = ()
    """Secrets of `profile.secrets` the team does not have."""
    error: str | None = None


def agent_environment(
    profile: AcpProfile,
    team_id: int,
    *,
    only: Iterable[str] | None = None,
    in_container: bool = False,
) -> AgentEnvironment:
    """`only`: the conversation's secret names (an automation's allowed_secrets); a secret
    outside them is missing for this agent, as if the team had none by that name.
    `in_container`: for an agent in the conversation's container (no PATH of ours: the
    image's stands; no host directory to show it)."""
    from teams.secrets import secret_values_for_team

    values = secret_values_for_team(team_id) if profile.secret_names else {}
    if only is not None:
        allowed = set(only)
        values = {name: value for name, value in values.items() if name in allowed}
    env: dict[str, str] = {} if in_container else {"PATH": DEFAULT_PATH}
    for name, value in profile.env.items():
        if isinstance(value, SecretRef):
            if value.secret not in values:
                return AgentEnvironment(
                    error=(
                        f"The agent profile {profile.name!r} sets {name} from the team secret "
                        f"{value.secret}, which the team does not have: an admin can add it "
                        "on the team's Secrets page."
                    )
                )
            env[name] = values[value.secret]
        else:
            env[name] = value
    missing = []
    for name in profile.secrets:
        if name in values:
            env.setdefault(name, values[name])
        else:
            missing.append(name)
    return AgentEnvironment(env=env, missing=tuple(missing))
