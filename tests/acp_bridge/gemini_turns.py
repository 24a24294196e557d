"""Running the real Gemini CLI in a conversation, for test_real_gemini*.py: the network it
needs, its processes, the request it holds in the inbox."""

from __future__ import annotations

import os
from pathlib import Path

from orchestration.control import approvals
from teams.policies import policy_update
from tests.acp_bridge.fake_gemini import FakeGemini
from tests.acp_bridge.gemini_agent import ENTRY
from tests.conftest import wait_for


def allow_host_network(settings, user, team) -> None:
    """The agent reaches the fake model on the host's loopback: the "host" network, which the
    site and the team's policy must both allow; and it runs sandboxed or not at all."""
    settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK = True
    settings.CANVAS_UNSANDBOXED_COMMANDS = False
    policy_update(by=user, team=team, network="host")


def gemini_pids() -> list[int]:
    """Gemini CLI processes below this pytest (node running the installed gemini.js, not the
    bwrap holding it): a worker's too, and never another test run's."""
    from tests.acp_bridge.conftest import agent_processes  # which imports this module

    entry = os.path.realpath(ENTRY)
    found = []
    for shown in agent_processes():
        pid, _, cmdline = shown.partition(": ")
        program, _, rest = cmdline.partition(" ")
        if Path(program).name == "node" and rest.startswith(f"{entry} "):
            found.append(int(pid))
    return sorted(found)


def held(conversation, fake: FakeGemini, command: str):
    """The one request Gemini holds in the inbox, to run `command`, once it is there."""
    wait_for(
        lambda: approvals.pending_actions(conversation.pk), timeout=90,
        message=f"Gemini asked no permission; the fake model saw:\n{fake.log()}",
    )  # fmt: skip
    (pending,) = approvals.pending_actions(conversation.pk)
    assert pending.kind == "execute" and command in pending.title, pending
    return pending
