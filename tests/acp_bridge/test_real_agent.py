"""A real third-party ACP agent through our bridge: the Claude Code ACP adapter (installed by
`make acp-agents`, see real_agent.py) in the sandbox, its model a fake Anthropic API on
127.0.0.1 (fake_anthropic.py). One full turn each: the model asks to Write hello.txt, the agent
asks us for permission, we answer by option kind, and the tool really runs (or really does not).

Not installed is a failure, never a skip: `make test` installs it first.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from acp.schema import AgentMessageChunk, PermissionOption, ToolCallProgress, ToolCallStart

from acp_bridge.session import AcpSession
from tests.acp_bridge.fake_anthropic import FINAL_TEXT, REFUSED_TEXT, FakeAnthropic
from tests.acp_bridge.real_agent import claude_agent

pytestmark = [pytest.mark.acp, pytest.mark.timeout(90)]

CONTENT = "hello from a real agent\n"
TURN_SECONDS = 60.0


@pytest.fixture(autouse=True)
def _sandbox_with_host_network(settings) -> None:
    """The agent must reach the fake model on the host's loopback: "host" network, which the
    sandbox grants only where the site allows it. And it runs in the sandbox or not at all
    (SandboxUnavailable, a failure), never as a plain process."""
    settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK = True
    settings.CANVAS_UNSANDBOXED_COMMANDS = False


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


class Permissions:
    """An on_permission callback that records what it was asked and picks by option kind."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.asked: list[tuple[str, Any, list[PermissionOption]]] = []

    async def __call__(self, session_id: str, tool_call: Any, options: list[PermissionOption]):
        self.asked.append((session_id, tool_call, options))
        return next(o.option_id for o in options if o.kind == self.kind)


async def run_turn(workspace: Path, fake: FakeAnthropic, permissions: Permissions):
    agent = claude_agent(fake.base_url)
    async with AcpSession.start(
        agent.command,
        agent.args,
        env=agent.env,
        cwd=workspace,
        readonly=agent.readonly,
        network="host",
        on_permission=permissions,
        timeout=TURN_SECONDS,
    ) as session:
        assert session.initialize_response is not None
        assert session.initialize_response.protocol_version == 1
        session_id = await session.new_session()
        result = await session.prompt("Create hello.txt in the workspace.")
        return session_id, result, session.updates(), session.process.stderr_tail()


def text_of(updates: list[Any]) -> str:
    return "".join(u.content.text for u in updates if isinstance(u, AgentMessageChunk))


def write_call(updates: list[Any]) -> tuple[ToolCallStart, list[ToolCallProgress]]:
    starts = [u for u in updates if isinstance(u, ToolCallStart)]
    assert len(starts) == 1, starts
    progress = [
        u
        for u in updates
        if isinstance(u, ToolCallProgress) and u.tool_call_id == starts[0].tool_call_id
    ]
    return starts[0], progress


def assert_asked_for_the_write(permissions: Permissions, session_id: str, target: Path) -> None:
    assert len(permissions.asked) == 1, permissions.asked
    asked_session, tool_call, options = permissions.asked[0]
    assert asked_session == session_id
    assert tool_call.tool_call_id.startswith("toolu_")
    assert tool_call.kind == "edit"
    assert tool_call.raw_input == {"file_path": str(target), "content": CONTENT}
    assert [loc.path for loc in tool_call.locations or []] == [str(target)]
    kinds = {o.kind for o in options}
    assert {"allow_once", "reject_once"} <= kinds, options
    assert len({o.option_id for o in options}) == len(options)


async def test_real_agent_asks_permission_and_the_allowed_write_runs(workspace) -> None:
    target = workspace / "hello.txt"
    permissions = Permissions("allow_once")
    started = time.monotonic()
    with FakeAnthropic(target, CONTENT) as fake:
        session_id, result, updates, stderr = await run_turn(workspace, fake, permissions)
        log = fake.log()
        tool_results = list(fake.script.tool_results)
    detail = f"fake model requests:\n{log}\nagent stderr:\n" + "\n".join(stderr)
    assert result.stop_reason == "end_turn", detail
    assert_asked_for_the_write(permissions, session_id, target)
    assert target.read_text() == CONTENT, detail
    start, progress = write_call(updates)
    assert start.kind == "edit"
    assert [p.status for p in progress if p.status][-1] == "completed", progress
    assert text_of(updates).strip() == FINAL_TEXT, detail
    assert len(tool_results) == 1 and not tool_results[0].get("is_error"), tool_results
    assert "tool_use" in fake.kinds() and "final" in fake.kinds(), detail
    assert time.monotonic() - started < TURN_SECONDS


async def test_real_agent_refused_permission_writes_nothing(workspace) -> None:
    target = workspace / "hello.txt"
    permissions = Permissions("reject_once")
    with FakeAnthropic(target, CONTENT) as fake:
        session_id, result, updates, stderr = await run_turn(workspace, fake, permissions)
        log = fake.log()
        tool_results = list(fake.script.tool_results)
    detail = f"fake model requests:\n{log}\nagent stderr:\n" + "\n".join(stderr)
    assert result.stop_reason == "end_turn", detail
    assert_asked_for_the_write(permissions, session_id, target)
    assert not target.exists()
    assert list(workspace.iterdir()) == []
    _, progress = write_call(updates)
    assert [p.status for p in progress if p.status][-1] == "failed", progress
    assert len(tool_results) == 1 and tool_results[0].get("is_error"), tool_results
    assert text_of(updates).strip() == REFUSED_TEXT, detail
