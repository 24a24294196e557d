"""The real Gemini CLI (`gemini --acp`, @google/gemini-cli pinned in tests/acp_bridge/npm) on
real Celery workers, its model the fake Gemini API on 127.0.0.1 (fake_gemini.py). One
conversation, three turns, each asking to run a shell command that appends to runs.txt:
1. approved in our inbox: the command runs in the workspace and its output is the call's result;
2. the next message goes to the same agent process and session, kept warm by the worker;
3. the worker restarts (its pool closes the agent, the agent's home stays): the new worker's
   agent loads the session from that home with session/load, the model sees the earlier
   turns' tool results (a transcript replay would not carry them), and this time the person
   refuses: nothing runs and the model is told so.

Gemini CLI 0.61.0's session/load erases the session it loads when it runs in the same UTC
minute the session was created (google-gemini/gemini-cli#28693, open): the load first starts
recording under the same id, in a file named by the minute and the id, which is then the
session's own file, and resets its messages. So turn 3 waits for the next minute, as any load
after a real restart would be; within the minute the turn falls back to a replayed transcript.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from conversations.events import (
    AcpSessionEvent,
    ActionEvent,
    AgentMessageEvent,
    ObservationEvent,
    Status,
    StatusChangeEvent,
)
from orchestration import services
from orchestration.chain.dispatch import ACP_QUEUE
from orchestration.control import approvals
from orchestration.external.home import agent_home
from tests.acp_bridge.fake_gemini import FINAL_TEXT, REFUSED_TEXT, FakeGemini
from tests.acp_bridge.gemini_agent import gemini_profile
from tests.acp_bridge.gemini_turns import allow_host_network, gemini_pids, held
from tests.acp_bridge.turns import of, row
from tests.conftest import wait_for

pytestmark = [
    pytest.mark.acp,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
]

COMMAND = "echo ran >> runs.txt && cat runs.txt"
AGENT = "gemini"
"""Replaces the preset of that name (which runs `gemini --acp` from PATH)."""


def _worker_env(profiles: dict) -> dict[str, str]:
    """A worker is a subprocess: its agent profiles and sandbox rules come from its
    environment. The host network lets the agent reach the fake model on loopback."""
    return {
        "CANVAS_ACP_AGENTS": json.dumps(profiles),
        "CANVAS_SANDBOX_ALLOW_HOST_NETWORK": "1",
        "CANVAS_UNSANDBOXED_COMMANDS": "0",
    }


def _answer(conversation, user, kind: str, fake: FakeGemini) -> None:
    """Wait for the turn's permission request and answer it with the option of `kind`; the
    turn then ends."""
    turns = len(of(conversation, AgentMessageEvent))
    action = held(conversation, fake, COMMAND)
    option = next(o for o in action.options if o.kind == kind)
    approvals.action_approve(
        conversation_id=conversation.pk, action_id=action.action_id, by=user,
        option_id=option.option_id,
    )  # fmt: skip
    wait_for(
        lambda: row(conversation).status == Status.FINISHED
        and len(of(conversation, AgentMessageEvent)) > turns,
        timeout=90, message=f"the turn did not end:\n{fake.log()}",
    )  # fmt: skip


def _session_minute(conversation, session_id: str) -> str:
    """The UTC minute Gemini named the session's file by: chats/session-<minute>-<id[:8]>."""
    (found,) = agent_home(str(conversation.pk)).glob(
        f".gemini/tmp/*/chats/session-*-{session_id[:8]}.jsonl"
    )
    return found.name.removeprefix("session-")[: len("YYYY-MM-DDTHH-MM")]


def _results(conversation) -> list[ObservationEvent]:
    calls = {a.tool_call_id for a in of(conversation, ActionEvent) if a.kind == "execute"}
    return [o for o in of(conversation, ObservationEvent) if o.tool_call_id in calls]


def test_gemini_runs_an_approved_command_stays_warm_and_loads_its_session_after_a_restart(
    start_worker, user, team, settings
):
    allow_host_network(settings, user, team)
    with FakeGemini(COMMAND) as fake:
        profiles = {AGENT: gemini_profile(fake.address)}
        settings.CANVAS_ACP_AGENTS = profiles  # conversation_create checks it here
        first = start_worker(queues=(ACP_QUEUE,), extra_env=_worker_env(profiles))
        conversation = services.conversation_create(
            owner=user, prompt="Run the command.", model="demo", agent=AGENT, team=team.pk
        )
        runs = Path(row(conversation).workspace_path) / "runs.txt"

        _answer(conversation, user, "allow_once", fake)  # 1: approved
        assert runs.read_text() == "ran\n"
        (result,) = _results(conversation)
        assert result.content.strip() == "ran" and not result.is_error, result
        assert of(conversation, AgentMessageEvent)[-1].text == FINAL_TEXT
        (session,) = of(conversation, AcpSessionEvent)
        assert (session.how, session.agent_name, session.agent_version) == (
            "new", "gemini-cli", "0.61.0",
        )  # fmt: skip
        pids = gemini_pids()
        assert len(pids) == 1, pids  # kept by the worker after the turn

        services.conversation_post_message(  # 2: the warm agent
            conversation_id=conversation.pk, text="Again, please.", sender=user
        )
        _answer(conversation, user, "allow_once", fake)
        assert runs.read_text() == "ran\nran\n"
        assert gemini_pids() == pids
        assert [s.session_id for s in of(conversation, AcpSessionEvent)] == [session.session_id]

        first.stop()  # 3: a restart; the worker's pool closes the agent at shutdown
        wait_for(lambda: not gemini_pids(), 15, message="the kept agent to end with its worker")
        start_worker(queues=(ACP_QUEUE,), extra_env=_worker_env(profiles))
        created = _session_minute(conversation, session.session_id)
        wait_for(
            lambda: datetime.now(UTC).strftime("%Y-%m-%dT%H-%M") != created, 65,
            message="the minute the session was created to pass (gemini-cli#28693)",
        )  # fmt: skip
        asked = len(fake.requests)
        services.conversation_post_message(
            conversation_id=conversation.pk, text="Once more.", sender=user
        )
        _answer(conversation, user, "reject_once", fake)
        loaded = [r.body for r in fake.requests[asked:] if r.kind == "final"]

    sessions = of(conversation, AcpSessionEvent)
    assert [(s.how, s.session_id) for s in sessions] == [
        ("new", session.session_id), ("loaded", session.session_id),
    ]  # fmt: skip
    assert runs.read_text() == "ran\nran\n"  # refused: not run a third time
    resumed = [e for e in of(conversation, StatusChangeEvent) if e.status == Status.RUNNING]
    assert resumed[-1].reason == "rejected by alice"  # its reject option, though "approved"
    # One call and one result a turn: the history Gemini replays after its load answer is
    # not recorded again.
    assert [r.is_error for r in _results(conversation)] == [False, False, True]
    assert [m.text for m in of(conversation, AgentMessageEvent)] == [
        FINAL_TEXT, FINAL_TEXT, REFUSED_TEXT,
    ]  # fmt: skip
    assert fake.script.tool_results[-1] == {
        "error": 'Tool "run_shell_command" was canceled by the user.'
    }
    # After the load the model is sent the earlier turns with their commands' outputs (what a
    # replayed transcript would lack): turn 2's "ran\nran" included.
    (history,) = loaded
    texts = [part.get("text", "") for content in history["contents"] for part in content["parts"]]
    assert "Run the command." in texts and "Again, please." in texts
    outputs = [
        part["functionResponse"]["response"].get("output", "")
        for content in history["contents"]
        for part in content["parts"]
        if "functionResponse" in part
    ]
    assert any("Output: ran\nran\n" in output for output in outputs), outputs
