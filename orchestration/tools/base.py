"""What a tool is: a name, a Pydantic argument model, a read-only flag and a run function.

Tools receive already-validated arguments; turning a model's raw call into those (and every
way that can fail) is the loop's job, so each tool only does its one thing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from teams.vocabulary import RISK_NAMES
from workspaces.base import Workspace


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True, slots=True)
class ToolResult:
    content: str
    is_error: bool = False
    exit_code: int | None = None
    finish: bool = False
    """True when the run should end after this result (the finish tool)."""
    output_file: str | None = None
    """Where the whole output is when `content` holds only its head and tail."""


class LazySecrets(Mapping[str, str]):
    """A team's secret values, read on first use: most commands reference none, so most slices
    never decrypt anything. Its repr never shows a value."""

    def __init__(self, load: Callable[[], Mapping[str, str]]) -> None:
        self._load = load
        self._values: dict[str, str] | None = None
        self._lock = threading.Lock()

    def _loaded(self) -> dict[str, str]:
        if self._values is None:
            with self._lock:
                if self._values is None:
                    self._values = dict(self._load())
        return self._values

    def __getitem__(self, name: str) -> str:
        return self._loaded()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())

    def __repr__(self) -> str:
        return f"<LazySecrets {'loaded' if self._values is not None else 'not loaded'}>"


def team_secrets(team_id: int, *, only: Iterable[str] | None = None) -> LazySecrets:
    """The team's secrets for tools, loaded (and decrypted) only when a tool asks; with
    `only`, just those names (an automation's allowed_secrets): the others do not exist for
    the run. Redaction still knows them all (conversations.redaction)."""

    def load() -> Mapping[str, str]:
        from teams.secrets import secret_values_for_team

        values = secret_values_for_team(team_id)
        if only is None:
            return values
        return {name: values[name] for name in only if name in values}

    return LazySecrets(load)


@dataclass(frozen=True, slots=True)
class ToolContext:
    conversation_id: str
    workspace: Workspace
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)
    """The team's secrets by name; tools hand a value only to the command that names it."""
    cancel: threading.Event | None = None
    """Set when a person interrupts the run: long-running tools stop what they are doing."""


class Tool(Protocol):
    name: ClassVar[str]
    description: ClassVar[str]
    args_model: ClassVar[type[ToolArgs]]
    read_only: ClassVar[bool]

    def run(self, args: Any, ctx: ToolContext) -> ToolResult: ...


SECURITY_RISK_ARGUMENT = "security_risk"
SECURITY_RISK_SCHEMA = {
    "type": "string",
    "enum": list(RISK_NAMES),
    "description": (
        "Your estimate of this call's risk. LOW: reads or harmless, reversible changes inside "
        "the workspace. MEDIUM: changes that are hard to undo, or that reach outside the "
        "workspace in a limited way. HIGH: destructive, privileged, or sends data or code "
        "across the network. Risky calls may wait for a person's approval."
    ),
}


def tool_schema(tool: Tool) -> dict[str, Any]:
    """The OpenAI/LiteLLM function-calling schema for a tool. Tools that change things also
    take a required `security_risk`, which the loop strips before validating arguments."""
    return _schema(type(tool))


@cache
def _schema(tool_cls: type) -> dict[str, Any]:
    # Cached per tool class: building JSON schemas with pydantic costs ~1 ms per slice.
    parameters = tool_cls.args_model.model_json_schema()
    parameters.pop("title", None)
    if not tool_cls.read_only:
        parameters.setdefault("properties", {})[SECURITY_RISK_ARGUMENT] = SECURITY_RISK_SCHEMA
        parameters["required"] = [*parameters.get("required", []), SECURITY_RISK_ARGUMENT]
    return {
        "type": "function",
        "function": {
            "name": tool_cls.name,
            "description": tool_cls.description,
            "parameters": parameters,
        },
    }
