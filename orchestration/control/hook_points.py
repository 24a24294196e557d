"""Where the runner asks the team's hooks (teams.hooks) whether a step may go on.

Each call point takes the team's enabled hooks from a `TeamHooks` snapshot (one query for every
event; the runner takes one per slice, so an admin's change applies from the next slice, and
no hooks means no subprocess at all), builds the JSON the hooks read on stdin (with the team's
secrets redacted), runs them in order through orchestration.control.hooks and folds the outcomes into
one HookVerdict. Called without a snapshot, a call point reads a fresh one. The caller acts on it: a denied PreToolUse becomes a rejected
observation (rejection_source="hook"), a denied Stop sends the reason back to the model, and
every line in `failures` is reported as an AgentErrorEvent(code="hook_failed").

Call these from workers only: hooks run synchronously, up to their timeouts each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from conversations.events import ActionEvent, ObservationEvent
from teams.hooks import hook_specs_for_team
from teams.policies import policy_for_team
from teams.vocabulary import HookEvent

from .hooks import HookOutcome, HookSpec, run_hooks
from .outgoing import redact_for_team

PRE_TOOL_USE = HookEvent.PRE_TOOL_USE.value
POST_TOOL_USE = HookEvent.POST_TOOL_USE.value
USER_PROMPT_SUBMIT = HookEvent.USER_PROMPT_SUBMIT.value
STOP = HookEvent.STOP.value


@dataclass(frozen=True, slots=True)
class TeamHooks:
    """A team's enabled hooks by event (one query), and the network its commands, and so its
    hooks, get (None: read from the policy when a hook is about to run)."""

    team_id: int
    by_event: dict[str, list[dict[str, Any]]]
    network: str | None = None

    @classmethod
    def load(cls, team_id: int, *, network: str | None = None) -> TeamHooks:
        by_event: dict[str, list[dict[str, Any]]] = {}
        for spec in hook_specs_for_team(team_id):
            by_event.setdefault(spec["event"], []).append(spec)
        return cls(team_id, by_event, network)


@dataclass(frozen=True, slots=True)
class HookVerdict:
    allowed: bool = True
    reason: str = ""
    """Why the step was denied, as the hook said it (shown to the model and the people)."""
    hook: str = ""
    """Name of the hook that denied; empty when allowed."""
    failures: list[str] = field(default_factory=list)
    """One line per hook that broke (timeout, crash, bad regex), allowed or not."""


def pre_tool_use(
    *, team_id: int, conversation_id: str, action: ActionEvent, arguments: dict, cwd: str,
    hooks: TeamHooks | None = None,
) -> HookVerdict:  # fmt: skip
    """Before `action` runs. `arguments` is the parsed argument object (the event keeps the
    model's raw string). Denied: do not run the tool."""
    payload = _tool_payload(PRE_TOOL_USE, conversation_id, action, arguments)
    return _decide(
        hooks or TeamHooks.load(team_id), PRE_TOOL_USE, payload, tool=action.tool, cwd=cwd
    )


def post_tool_use(
    *, team_id: int, conversation_id: str, action: ActionEvent, observation: ObservationEvent,
    cwd: str, hooks: TeamHooks | None = None,
) -> HookVerdict:  # fmt: skip
    """After the tool ran. The tool's effect already happened: a denial is feedback for the
    model (and the people), not an undo."""
    payload = _tool_payload(POST_TOOL_USE, conversation_id, action, _arguments_of(action))
    payload["observation"] = {
        "content": observation.content,
        "is_error": observation.is_error,
        "exit_code": observation.exit_code,
        "interrupted": observation.interrupted,
        "rejected": observation.rejected,
    }
    return _decide(
        hooks or TeamHooks.load(team_id), POST_TOOL_USE, payload, tool=action.tool, cwd=cwd
    )


def user_prompt_submit(
    *, team_id: int, conversation_id: str, text: str, sender: str | None, cwd: str | None,
    hooks: TeamHooks | None = None,
) -> HookVerdict:  # fmt: skip
    """Before a person's (or an automation's) message reaches the agent."""
    payload = _payload(USER_PROMPT_SUBMIT, conversation_id, text=text, sender=sender)
    return _decide(
        hooks or TeamHooks.load(team_id), USER_PROMPT_SUBMIT, payload, tool=None, cwd=cwd
    )


def stop(
    *, team_id: int, conversation_id: str, final_message: str, cwd: str,
    hooks: TeamHooks | None = None,
) -> HookVerdict:  # fmt: skip
    """When the agent wants to finish. Denied: the reason goes back to the model, which keeps
    working."""
    payload = _payload(STOP, conversation_id, final_message=final_message)
    return _decide(hooks or TeamHooks.load(team_id), STOP, payload, tool=None, cwd=cwd)


# --- internals ----------------------------------------------------------------------------------


def _payload(event: str, conversation_id: str, **extra: Any) -> dict[str, Any]:
    return {"event": event, "conversation_id": str(conversation_id), "tool": None, **extra}


def _tool_payload(
    event: str, conversation_id: str, action: ActionEvent, arguments: Any
) -> dict[str, Any]:
    return _payload(
        event, conversation_id, tool=action.tool, tool_call_id=action.tool_call_id,
        arguments=arguments,
    )  # fmt: skip


def _arguments_of(action: ActionEvent) -> Any:
    """PostToolUse has no parsed arguments from the caller; the raw string is JSON almost
    always, and a hook gets it verbatim when it is not (or is blank)."""
    parsed = action.parsed_arguments
    if parsed.error is not None or not action.arguments.strip():
        return action.arguments
    return parsed.value


def _failure_line(name: str, failure: str, *, fail_closed: bool) -> str:
    # One line even when the hook's stderr had several, and no dangling ":" when it had none.
    failure = " ".join(failure.split()).removesuffix(":")
    return f"hook {name!r} {failure} ({'fail-closed' if fail_closed else 'fail-open'})"


def _specs(hooks: TeamHooks, event: str) -> tuple[list[HookSpec], list[HookOutcome]]:
    """The runnable specs, and outcomes for hooks that cannot run at all. The service checks
    matchers when they are saved; this only guards rows changed behind its back."""
    specs: list[HookSpec] = []
    broken: list[HookOutcome] = []
    for data in hooks.by_event.get(event, ()):
        spec = HookSpec(**data)
        try:
            re.compile(spec.matcher)
        except re.error:
            failure = "has an invalid matcher"
            reason = (
                f"hook {spec.name!r} {failure}; it is configured to block when it fails."
                if spec.fail_closed
                else ""
            )
            broken.append(HookOutcome(spec.name, not spec.fail_closed, reason, failure))
            continue
        specs.append(spec)
    return specs, broken


def _decide(
    hooks: TeamHooks, event: str, payload: dict[str, Any], *, tool: str | None, cwd: str | None
) -> HookVerdict:
    specs, outcomes = _specs(hooks, event)
    by_name = {spec.name: spec for spec in specs}
    failures = [_failure_line(o.hook, o.failure, fail_closed=not o.allowed) for o in outcomes]
    denied = next((o for o in outcomes if not o.allowed), None)
    if denied is None and specs:
        # Hooks read no secret value: a tool's output reaches PostToolUse before the log's
        # door has redacted it, and arguments are the model's raw text. They reach what the
        # team's sandboxed commands reach (workspaces.sandbox).
        payload = redact_for_team(hooks.team_id, payload)
        network = hooks.network or policy_for_team(hooks.team_id).network
        for outcome in run_hooks(specs, event, payload, tool=tool, cwd=cwd, network=network):
            if outcome.failure:
                closed = by_name[outcome.hook].fail_closed
                failures.append(_failure_line(outcome.hook, outcome.failure, fail_closed=closed))
            if not outcome.allowed:
                denied = outcome
    if denied is not None:
        return HookVerdict(False, denied.reason, denied.hook, failures)
    return HookVerdict(True, "", "", failures)
