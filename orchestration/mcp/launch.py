"""How one configured server is started for a slice: its environment or headers with each
secret reference replaced by the team secret's value (on the worker, for this connection only),
where it runs, and what it may see.

A stdio server gets PATH and the config's variables, nothing of the worker's; HOME and TMPDIR
are a private directory made for it in its conversation's state folder. It starts in the conversation's workspace (its
one writable folder besides that home), sees the system dirs and the site's
CANVAS_SANDBOX_READONLY_PATHS, and has the team policy's network. The team's command, args and
PATH add no mount: the command is found in what the sandbox already shows
(workspaces.mounts.command_in_view, never along the configured PATH, never in the workspace,
where an agent could have planted it) and run by that absolute path; the configured PATH is
only the server's own environment inside. A reference to a secret the
conversation cannot use (none by that name, or outside an automation's allowed secrets) makes
the server unavailable with a reason naming the secret, never a value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from acp_bridge.profiles import EnvValue, SecretRef
from workspaces.mounts import CommandRefused, command_in_view
from workspaces.sandbox import Network

from .rules import McpServerConfig
from .stdio import StdioLaunch

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


class LaunchError(Exception):
    """The server cannot be started as configured; the message names what, never a value."""


@dataclass(frozen=True)
class ServerLaunch:
    config: McpServerConfig
    stdio: StdioLaunch | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    secrets_used: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Secret name -> value, to redact from whatever this server's failures say."""


def _resolve(
    values: Mapping[str, EnvValue], secrets: Mapping[str, str], server: str, what: str,
    used: dict[str, str],
) -> dict[str, str]:  # fmt: skip
    resolved: dict[str, str] = {}
    for key, value in values.items():
        if isinstance(value, SecretRef):
            if value.secret not in secrets:
                raise LaunchError(
                    f"{what} {key} is taken from the team secret {value.secret}, which this "
                    "conversation does not have: an admin can add it on the team's Secrets page."
                )
            resolved[key] = used[value.secret] = secrets[value.secret]
        else:
            resolved[key] = value
    return resolved


def server_launch(
    config: McpServerConfig, *, secrets: Mapping[str, str], workspace: str | None,
    network: Network, conversation_id: str | None = None,
) -> ServerLaunch:  # fmt: skip
    """Raises LaunchError when the server cannot be started as configured. A stdio server
    started for `conversation_id` keeps its private home in that conversation's state folder
    (orchestration.mcp.stdio); without one, in a temporary folder."""
    used: dict[str, str] = {}
    if config.transport == "http":
        headers = _resolve(config.headers, secrets, config.name, "header", used)
        return ServerLaunch(config, headers=headers, secrets_used=used)
    if not workspace or not os.path.isdir(workspace):
        raise LaunchError("the conversation has no workspace folder on this worker to start it in")
    env = {"PATH": DEFAULT_PATH, **_resolve(config.env, secrets, config.name, "env", used)}
    try:
        command = command_in_view(config.command)
    except CommandRefused as exc:
        raise LaunchError(str(exc)) from None
    launch = StdioLaunch(
        command=command, args=config.args, env=env, cwd=Path(workspace), network=network,
        home_for=(conversation_id, config.name) if conversation_id else None,
    )  # fmt: skip
    return ServerLaunch(config, stdio=launch, secrets_used=used)
