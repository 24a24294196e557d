"""Which actions wait for a person: risk assessment and the confirmation decision.

Pure. The effective risk of a call is the higher of the model's own `security_risk` and the
pattern analyzer's findings; the conversation's confirmation mode (always / never / risky at or
above a threshold) decides whether it is held. Read-only tools never wait.
"""

from __future__ import annotations

from conversations.events import ActionEvent
from teams.vocabulary import ConfirmationMode

from ..tools.base import SECURITY_RISK_ARGUMENT, Tool
from .risk import Risk, analyze, effective_risk


def assess(action: ActionEvent, tool: Tool | None, workspace_root: str | None) -> ActionEvent:
    """The action with its risk fields filled in."""
    if tool is None or tool.read_only:
        return action
    arguments = action.parsed_arguments.as_object or {}
    model_risk = Risk.parse(arguments.get(SECURITY_RISK_ARGUMENT))
    findings = analyze(action.tool, arguments, workspace_root)
    return action.model_copy(
        update={
            "security_risk": model_risk.name if model_risk else None,
            "risk": effective_risk(model_risk, findings).name,
            "risk_rules": [f.rule for f in findings],
        }
    )


def needs_confirmation(
    action: ActionEvent, tool: Tool | None, *, mode: str, threshold: str
) -> bool:
    if tool is None or tool.read_only or mode == ConfirmationMode.NEVER:
        return False  # unknown tools fail on their own, without a person's time
    if mode == ConfirmationMode.ALWAYS:
        return True
    limit = Risk.parse(threshold, Risk.HIGH)
    return (Risk.parse(action.risk) or Risk.MEDIUM) >= limit  # type: ignore[operator]
