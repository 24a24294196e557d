"""A run's limits: the tighter of the conversation's own settings and its team's policy.

The runner builds `RunLimits` at every slice start from the policy as it is then, so an admin
tightening a policy mid-run takes effect within a slice; loosening it lets a stopped run be
continued. Each limit that ends a run says which limit it was and how to go on.
"""

from __future__ import annotations

from dataclasses import dataclass

from conversations.events import AgentErrorEvent, ObservationEvent
from conversations.projections import RunState
from teams.budget import spend_this_month
from teams.models import Team
from teams.policies import CONFIRMATION_RANK, THRESHOLD_RANK, EffectivePolicy, stricter_rank

from .agent import AgentConfig

LIMIT_REASONS = {
    "max_iterations": "max iterations reached",
    "budget_run": "run budget reached",
    "budget_month": "monthly team budget reached",
}
"""The status change's reason for each limit's error code."""

TEAM_POLICY = "the team policy's limit"
CONVERSATION = "this conversation's limit"


@dataclass(frozen=True, slots=True)
class RunLimits:
    policy: EffectivePolicy
    max_iterations: int
    iterations_source: str
    max_cost_usd: float | None
    cost_source: str
    confirmation_mode: str
    """The stricter of the conversation's and the policy's, for the approval step."""
    risk_threshold: str

    def tool_allowed(self, name: str) -> bool:
        return self.policy.tool_allowed(name)


def run_limits(config: AgentConfig, policy: EffectivePolicy) -> RunLimits:
    iterations, iterations_source = config.max_iterations, CONVERSATION
    cap = policy.max_iterations_per_run
    # On a tie the policy is named: the conversation most likely took its value from it.
    if cap is not None and cap <= iterations:
        iterations, iterations_source = cap, TEAM_POLICY
    cost, cost_source = config.max_cost_usd, CONVERSATION
    team_cost = policy.max_cost_per_run_usd
    if team_cost is not None and (cost is None or float(team_cost) <= cost):
        cost, cost_source = float(team_cost), TEAM_POLICY
    return RunLimits(
        policy=policy,
        max_iterations=iterations,
        iterations_source=iterations_source,
        max_cost_usd=cost,
        cost_source=cost_source,
        confirmation_mode=stricter_rank(
            config.confirmation_mode, policy.confirmation_mode, CONFIRMATION_RANK
        ),
        risk_threshold=stricter_rank(config.risk_threshold, policy.risk_threshold, THRESHOLD_RANK),
    )


def _how_to_continue(source: str, what: str) -> str:
    if source == TEAM_POLICY:
        return (
            f"A team admin can raise the {what} in the team policy; send a message or press "
            "Run to continue."
        )
    return "Send a message or press Run to continue with a fresh run."


def limit_reached(limits: RunLimits, state: RunState, team_id: int) -> AgentErrorEvent | None:
    """The error that ends the run before its next model call, or None to go on."""
    if state.run_steps >= limits.max_iterations:
        return AgentErrorEvent(
            code="max_iterations",
            message=f"The run reached its limit of {limits.max_iterations} iterations "
            f"({limits.iterations_source}). "
            + _how_to_continue(limits.iterations_source, "iterations per run"),
        )
    if limits.max_cost_usd is not None and state.run_cost >= limits.max_cost_usd:
        return AgentErrorEvent(
            code="budget_run",
            message=f"The run has cost ${state.run_cost:.4f}, reaching its budget of "
            f"${limits.max_cost_usd:.4f} per run ({limits.cost_source}). "
            + _how_to_continue(limits.cost_source, "budget per run"),
        )
    monthly = limits.policy.max_cost_per_month_usd
    if monthly is not None:
        spent = spend_this_month(team_id)
        if spent >= monthly:
            return AgentErrorEvent(
                code="budget_month",
                message=f"Team {_team_name(team_id)} has spent ${spent:.4f} on models this "
                f"month, reaching its monthly budget of ${monthly:.4f} (the team policy's "
                "limit). A team admin can raise the monthly budget in the team policy; then "
                "press Run or send a message to continue.",
            )
    return None


def _team_name(team_id: int) -> str:
    name = Team.objects.filter(pk=team_id).values_list("name", flat=True).first()
    return repr(name) if name is not None else f"#{team_id}"


def tool_refused(tool_call_id: str, tool: str) -> ObservationEvent:
    """The result of a call to a tool the team policy does not allow: the model reads it and
    does something else; the run goes on."""
    return ObservationEvent(
        tool_call_id=tool_call_id,
        tool=tool,
        content=f"Tool '{tool}' is not allowed by this team's policy. Use another tool, or "
        "finish and explain what you could not do.",
        is_error=True,
    )
