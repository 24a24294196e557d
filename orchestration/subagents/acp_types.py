"""External (ACP) agents as sub-agent types: a native agent hands a sub-task to Claude Code (or
any ACP profile the team has) with `task`, `delegate` or `workflow`, and reads its answer.

Only profiles the site or the team configured are offered, never bare presets: a preset names a
CLI that may not be installed on any worker, and every type offered is listed in the spawning
tools' schema the model reads. The policy must allow the profile (`acp:NAME`), as for a
conversation started with it.
"""

from __future__ import annotations

from acp_bridge.profiles import acp_profiles_for
from teams.policies import EffectivePolicy

from .definitions import NAME, AgentDefinition

DESCRIPTION = (
    "The external coding agent {name!r} ({command}), working in this workspace with its own "
    "tools: give it a self-contained task with everything it needs; its last message is the "
    "answer. Its permission requests wait for a person like any approval."
)


def acp_definitions(team_id: int, policy: EffectivePolicy) -> list[AgentDefinition]:
    return [
        AgentDefinition(
            name=profile.name,
            description=DESCRIPTION.format(
                name=profile.name, command=profile.command.rsplit("/", 1)[-1]
            ),
            tools=(),
            model=None,
            max_iterations=None,
            instructions="",
            source="acp",
            acp_agent=profile.name,
        )  # fmt: skip
        for profile in acp_profiles_for(team_id)
        if profile.source != "preset"
        and NAME.match(profile.name)
        and policy.agent_kind_allowed(f"acp:{profile.name}")
    ]
