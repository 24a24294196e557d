"""What a team's MCP server may say: the value rules the service checks on every write, and
`McpServerConfig`, the checked shape the worker connects with.

The command, its arguments and its environment follow the ACP profiles' rules
(acp_bridge.profiles), so a secret is referenced the same way everywhere: `{"secret": NAME}`,
the name of a team secret whose value is read on the worker when the server starts. Headers
of an HTTP server take the same two forms. No config ever holds a secret value, so one can be
logged, listed by the API and audited as it is; errors name a field, never a literal value
(someone may have pasted a key where a reference belongs).

Pure: no ORM.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from acp_bridge.profiles import (
    AcpProfileValueError,
    EnvValue,
    SecretRef,
    clean_args,
    clean_command,
    clean_env,
    clean_secret_name,
)

Transport = Literal["stdio", "http"]
TRANSPORTS: tuple[Transport, ...] = ("stdio", "http")
NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,31}$")
"""Short, since a tool is offered as mcp__NAME__TOOL within the providers' 64 characters;
no "__" inside, so the name can be read back out of a tool's."""
HEADER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")
RESERVED_HEADERS = frozenset(
    {"host", "content-length", "content-type", "transfer-encoding", "connection", "accept",
     "mcp-session-id", "mcp-protocol-version", "last-event-id"}
)  # fmt: skip
"""Set by the MCP client itself; a team's value would break or spoof the protocol."""
PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,99}$")
"""teams.profiles' rule for a model profile's name, repeated to stay free of the ORM."""
MAX_URL_CHARS = 2000
MAX_HEADERS = 32
MAX_HEADER_VALUE_CHARS = 4096
MAX_PROFILES = 64
TOOL_PREFIX = "mcp__"


class McpValueError(ValueError):
    """One value is malformed; the message names the field, never a literal value."""


@dataclass(frozen=True, slots=True)
class McpServerConfig:
    """One server as the worker connects to it; safe to log (secret names only)."""

    name: str
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    url: str = ""
    env: Mapping[str, EnvValue] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    headers: Mapping[str, EnvValue] = field(
        default_factory=lambda: MappingProxyType({}), hash=False
    )
    model_profiles: tuple[str, ...] = ()
    """The model profiles it serves; empty: every one."""

    def serves(self, model_profile: str) -> bool:
        return not self.model_profiles or model_profile in self.model_profiles

    @property
    def secret_names(self) -> tuple[str, ...]:
        values = [*self.env.values(), *self.headers.values()]
        return tuple(dict.fromkeys(v.secret for v in values if isinstance(v, SecretRef)))


def tool_name(server: str, tool: str) -> str:
    """How the model sees a server's tool."""
    return f"{TOOL_PREFIX}{server}__{tool}"


def _as_json(values: Mapping[str, EnvValue]) -> dict[str, Any]:
    return {k: v.to_json() if isinstance(v, SecretRef) else v for k, v in values.items()}


def clean_name(value: Any) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise McpValueError(
            "an MCP server name is 1 to 32 letters, digits, '-' or single '_', starting with a "
            "letter or digit."
        )
    return value


def clean_transport(value: Any) -> Transport:
    if value not in TRANSPORTS:
        raise McpValueError('transport must be "stdio" or "http".')
    return value


def clean_url(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_URL_CHARS:
        raise McpValueError(f"url must be an http(s) URL of at most {MAX_URL_CHARS} characters.")
    value = value.strip()
    if not re.match(r"^https?://[^\s]+$", value, re.IGNORECASE):
        raise McpValueError("url must be an http(s) URL.")
    return value


def clean_headers(value: Any) -> dict[str, Any]:
    """NAME -> text or {"secret": NAME}, as stored. Errors name the header, never its value."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise McpValueError('headers must be an object of NAME: text or {"secret": NAME}.')
    if len(value) > MAX_HEADERS:
        raise McpValueError(f"headers has more than {MAX_HEADERS} entries.")
    cleaned: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not HEADER_NAME.fullmatch(key):
            raise McpValueError("header names are letters, digits and '-', at most 64.")
        if key.lower() in RESERVED_HEADERS:
            raise McpValueError(f"header {key} is set by the MCP client itself.")
        if isinstance(item, Mapping):
            if set(item) != {"secret"}:
                raise McpValueError(
                    f'header {key}: a reference is {{"secret": NAME}} and nothing else.'
                )
            try:
                name = clean_secret_name(item["secret"], f"header {key}'s secret")
            except AcpProfileValueError as exc:
                raise McpValueError(str(exc)) from None
            cleaned[key] = {"secret": name}
        elif isinstance(item, str):
            if len(item) > MAX_HEADER_VALUE_CHARS or any(c in item for c in "\r\n\x00"):
                raise McpValueError(
                    f"header {key}: a value is one line of at most {MAX_HEADER_VALUE_CHARS} "
                    "characters."
                )
            cleaned[key] = item
        else:
            raise McpValueError(f'header {key}: a value is text or {{"secret": NAME}}.')
    return cleaned


def clean_model_profiles(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list | tuple) or len(value) > MAX_PROFILES:
        raise McpValueError(f"model_profiles must be a list of at most {MAX_PROFILES} names.")
    for name in value:
        if not isinstance(name, str) or not PROFILE_NAME.fullmatch(name):
            raise McpValueError("model_profiles holds a name that is not a model profile's.")
    return list(dict.fromkeys(value))


def clean_server(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A whole server's fields (name aside) as stored: the transport decides which of
    command / args / env or url / headers it needs, and the other side must be empty."""
    transport = clean_transport(fields.get("transport"))
    cleaned: dict[str, Any] = {
        "transport": transport,
        "model_profiles": clean_model_profiles(fields.get("model_profiles")),
        "enabled": fields.get("enabled", True),
    }
    if not isinstance(cleaned["enabled"], bool):
        raise McpValueError("enabled must be true or false.")
    try:
        if transport == "stdio":
            if fields.get("url") or fields.get("headers"):
                raise McpValueError("a stdio server takes command, args and env, not url.")
            cleaned["command"] = clean_command(fields.get("command"))
            cleaned["args"] = list(clean_args(fields.get("args")))
            cleaned["env"] = _as_json(clean_env(fields.get("env")))
            cleaned |= {"url": "", "headers": {}}
        else:
            if fields.get("command") or fields.get("args") or fields.get("env"):
                raise McpValueError("an http server takes url and headers, not a command.")
            cleaned["url"] = clean_url(fields.get("url"))
            cleaned["headers"] = clean_headers(fields.get("headers"))
            cleaned |= {"command": "", "args": [], "env": {}}
    except AcpProfileValueError as exc:
        raise McpValueError(str(exc)) from None
    return cleaned


def secret_refs(values: Mapping[str, Any] | None) -> Mapping[str, EnvValue]:
    return MappingProxyType(
        {
            key: SecretRef(value["secret"]) if isinstance(value, Mapping) else value
            for key, value in (values or {}).items()
        }
    )


def config_from_row(row: Any) -> McpServerConfig:
    """A teams.models.McpServer row as a config (its values were checked when saved)."""
    return McpServerConfig(
        name=row.name,
        transport=row.transport,
        command=row.command,
        args=tuple(row.args or ()),
        url=row.url,
        env=secret_refs(row.env),
        headers=secret_refs(row.headers),
        model_profiles=tuple(row.model_profiles or ()),
    )
