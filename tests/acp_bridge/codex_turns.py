"""Running the real Codex ACP adapter in a conversation, for test_codex*.py: the fixtures
(registered for tests/acp_bridge in its conftest.py) and small readers.

`fake_openai` is the fake Responses API on 127.0.0.1 (fake_openai_responses.py), asking for one
shell command; `codex` starts a conversation with a site profile for Codex against it (first
turn dispatched, not run), with the host's network allowed by the site and the team's policy.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from conversations.events import Status
from orchestration import services
from orchestration.control import approvals
from teams.policies import policy_update
from tests.acp_bridge.codex_agent import NATIVE_BINARY, codex_profile
from tests.acp_bridge.fake_openai_responses import COMMAND, PROMPT, FakeResponses
from tests.acp_bridge.turns import row
from tests.conftest import wait_for


@pytest.fixture
def fake_openai() -> Iterator[FakeResponses]:
    with FakeResponses(COMMAND) as server:
        yield server


@pytest.fixture
def codex(user, team, settings, fake_openai):
    """A function starting a Codex conversation (its first turn dispatched, not run)."""
    settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK = True
    settings.CANVAS_UNSANDBOXED_COMMANDS = False
    settings.CANVAS_ACP_AGENTS = {"codex": codex_profile(fake_openai.base_url)}
    policy_update(by=user, team=team, network="host")

    def start():
        return services.conversation_create(
            owner=user, prompt=PROMPT, model="demo", agent="codex", team=team.pk
        )

    return start


def held(conversation, fake: FakeResponses):
    """The one request Codex holds in the inbox, once it is there."""
    wait_for(
        lambda: approvals.pending_actions(conversation.pk), timeout=60,
        message=f"Codex asked no permission; the fake model saw:\n{fake.log()}",
    )  # fmt: skip
    (pending,) = approvals.pending_actions(conversation.pk)
    assert pending.kind == "execute"
    assert row(conversation).status == Status.WAITING_FOR_CONFIRMATION
    return pending


def option(pending, kind: str) -> str:
    return next(o.option_id for o in pending.options if o.kind == kind)


def written(conversation) -> Path:
    return Path(row(conversation).workspace_path) / "codex.txt"


def codex_pids() -> list[int]:
    """Codex processes below this pytest (the binary itself, not the bwrap holding it): a
    worker's too, and never another test run's."""
    from tests.acp_bridge.conftest import agent_processes  # which imports this module

    binary = os.path.realpath(NATIVE_BINARY)
    found = []
    for shown in agent_processes():
        pid, _, cmdline = shown.partition(": ")
        if cmdline.startswith(f"{binary} "):
            found.append(int(pid))
    return found


def allow_when_asked(conversation, fake: FakeResponses, user):
    """Wait for Codex's request and allow it once in the inbox; the request answered."""
    pending = held(conversation, fake)
    decided = approvals.action_approve(
        conversation_id=conversation.pk, action_id=pending.action_id, by=user,
        option_id=option(pending, "allow_once"),
    )  # fmt: skip
    assert decided == "approved"
    return pending
