"""The words a team's policy and hooks are written in, each declared once.

Pure: no ORM and no app registry, so orchestration's pure modules (the risk analyzer, the
confirmation decision, the hook runner, the agent config) import these as well as teams.models,
which uses them as field choices.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Literal

from django.db.models import TextChoices


class RiskLevel(IntEnum):
    """How much harm a tool call can do, in order. The name is what is stored and shown."""

    LOW = 1
    MEDIUM = 2
    HIGH = 3

    @classmethod
    def parse(cls, value: object, default: RiskLevel | None = None) -> RiskLevel | None:
        if isinstance(value, RiskLevel):
            return value
        if isinstance(value, str) and value.strip().upper() in cls.__members__:
            return cls[value.strip().upper()]
        return default


RISK_NAMES: tuple[str, ...] = tuple(RiskLevel.__members__)
"""("LOW", "MEDIUM", "HIGH"): the stored values, lowest first."""

Risk = TextChoices("Risk", RISK_NAMES, module=__name__)
"""RiskLevel as field choices: ("LOW", "Low"), ("MEDIUM", "Medium"), ("HIGH", "High")."""

RiskName = Literal[RISK_NAMES]  # type: ignore[valid-type]
"""RiskLevel's names as a type, for pydantic fields."""


class ConfirmationMode(TextChoices):
    ALWAYS = "always", "Always confirm"
    NEVER = "never", "Never confirm"
    RISKY = "risky", "Confirm risky actions"


ConfirmationModeName = Literal[tuple(ConfirmationMode.values)]  # type: ignore[valid-type]
"""ConfirmationMode's values as a type, for pydantic fields."""


class HookEvent(TextChoices):
    """When a hook runs (orchestration.control.hook_points asks the hooks of each)."""

    PRE_TOOL_USE = "PreToolUse", "Before a tool runs"
    POST_TOOL_USE = "PostToolUse", "After a tool ran"
    USER_PROMPT_SUBMIT = "UserPromptSubmit", "When a message is sent"
    STOP = "Stop", "When the agent wants to finish"


HOOK_EVENTS: tuple[str, ...] = tuple(HookEvent.values)


class NetworkAccess(TextChoices):
    """What a sandboxed command (terminal, hook) may reach over the network. The sandbox
    (workspaces.sandbox, a peer app) spells the same two words as its `Network`."""

    NONE = "none", "No network"
    HOST = "host", "The host's network (its loopback services included)"


NetworkName = Literal[tuple(NetworkAccess.values)]  # type: ignore[valid-type]
"""NetworkAccess's values as a type, for pydantic fields."""
