"""External ACP agents in Docker workspaces, against the real engine: the bash agent of
docker_agent.sh runs inside the conversation's container (an exec with stdin attached), its
fs/* requests are served from the workspace with container paths, its terminal runs in the
container, its permission request waits in the inbox. A crashed or hung agent ends the turn
with a clear error and leaves nothing running in the container. Never skipped: without an
engine these fail."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from conversations.events import (
    AcpSessionEvent,
    AcpTurnEvent,
    ActionDecisionEvent,
    ActionEvent,
    AgentErrorEvent,
    AgentMessageEvent,
    AgentThoughtEvent,
    ObservationEvent,
    Status,
)
from conversations.models import Conversation
from orchestration import services
from orchestration.control import approvals
from tests.acp_bridge.docker_turns import (
    PROFILE,
    docker_engine,
    docker_profile,
    processes_settled,
)
from tests.acp_bridge.turns import drive_in_thread, join_clean, of, row
from tests.conftest import wait_for
from tests.runs import drive, script
from workspaces.spec import WorkspaceSpec

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]


def use_profile(settings, **extra) -> None:
    settings.CANVAS_ACP_AGENTS = {PROFILE: docker_profile(**extra)}


def start(engine, user, prompt: str, **kwargs):
    conversation = services.conversation_create(
        owner=user, prompt=prompt, model="demo", agent=PROFILE,
        workspace_spec=WorkspaceSpec(kind="docker"), **kwargs,
    )  # fmt: skip
    engine.made.append(str(conversation.pk))
    return conversation


def left_in_container(engine, conversation) -> list[str]:
    """What still runs in the container once a killed group has been reaped, less the
    container's own init and sleep (the engine fixture checks this after every test too)."""
    return processes_settled(engine, conversation.pk)


@pytest.fixture
def engine(settings) -> Iterator[docker.DockerClient]:
    yield from docker_engine(settings)


@pytest.fixture(autouse=True)
def profile(settings) -> None:
    use_profile(settings)


def test_a_full_turn_runs_inside_the_container(engine, user, dispatched):
    conversation = start(engine, user, "full")
    root = Path(row(conversation).workspace_path)
    root.mkdir(parents=True, exist_ok=True)
    (root / "in.txt").write_text("hello from the host\n")
    turn = drive_in_thread(dispatched)
    wait_for(lambda: approvals.pending_actions(conversation.pk), message="no permission request")
    pending = approvals.pending_actions(conversation.pk)[0]
    assert (pending.kind, pending.title) == ("edit", "Edit out.txt")
    assert [(o.option_id, o.kind) for o in pending.options] == [
        ("allow", "allow_once"), ("reject", "reject_once"),
    ]  # fmt: skip
    assert row(conversation).status == Status.WAITING_FOR_CONFIRMATION
    approvals.action_approve(
        conversation_id=conversation.pk, action_id=pending.action_id, by=user, option_id="allow"
    )
    join_clean(turn)

    assert row(conversation).status == Status.FINISHED
    session = of(conversation, AcpSessionEvent)[0]
    assert (session.agent, session.how) == (PROFILE, "new")
    assert [e.text for e in of(conversation, AgentThoughtEvent)] == ["looking around the container"]
    messages = [e.text for e in of(conversation, AgentMessageEvent)]
    assert messages[0] == "hello from the container"
    report = dict(line.split("=", 1) for line in messages[-1].splitlines() if "=" in line)
    assert report["read"] == "hello from the host"
    assert report["outside"] == "refused"  # /etc/passwd: outside the workspace root
    assert report["permission"] == "allow" and report["exit"] == "0"
    # The terminal ran in the container: its cwd is the container's workspace, its env the
    # agent's; the file the agent wrote is the host's, owned like the rest of the workspace.
    terminal = messages[-1].split("terminal=", 1)[1]
    assert terminal.split("\n")[:4] == [
        "from-terminal", "/workspace", "hello from the host", "set-by-agent",
    ]  # fmt: skip
    written = root / "sub" / "out.txt"
    assert written.read_text() == "written in the container\n"
    assert written.stat().st_uid == root.stat().st_uid
    assert of(conversation, ActionDecisionEvent)[0].option_id == "allow"
    calls = {e.tool_call_id: e for e in of(conversation, ActionEvent)}
    assert {"read-1", "edit-1", "run-1"} <= set(calls)
    results = {e.tool_call_id: e for e in of(conversation, ObservationEvent)}
    assert results["read-1"].content == "hello from the host\n"
    assert "from-terminal" in results["run-1"].content and not results["run-1"].is_error
    assert of(conversation, AcpTurnEvent)[-1].stop_reason == "end_turn"
    assert left_in_container(engine, conversation) == []


def test_the_agent_sees_only_the_profiles_environment(engine, user, team, dispatched, settings):
    from teams.secrets import secret_create

    secret_create(by=user, team=team, name="API_TOKEN", value="tok-d0c4e2-secret")
    use_profile(settings, env={"TOKEN": {"secret": "API_TOKEN"}, "MODE": "x"})
    conversation = start(engine, user, "env", team=team.pk)
    drive(dispatched)
    names = set(of(conversation, AgentMessageEvent)[0].text.split())
    # The image's and Docker's own (PATH, HOME, HOSTNAME) and bash's SHLVL, nothing else.
    assert names - {"PATH", "HOME", "HOSTNAME", "SHLVL"} == {"TOKEN", "MODE"}
    assert row(conversation).status == Status.FINISHED


def test_a_crash_ends_the_turn_with_its_stderr_redacted(engine, user, team, dispatched, settings):
    from teams.secrets import secret_create

    secret_create(by=user, team=team, name="API_TOKEN", value="tok-9a7b31-secret")
    use_profile(settings, env={"TOKEN": {"secret": "API_TOKEN"}})
    conversation = start(engine, user, "crash", team=team.pk)
    drive(dispatched)
    error = of(conversation, AgentErrorEvent)[0]
    assert error.code == "acp_agent_crashed", error.message
    assert "exited with code 3" in error.message and "about to crash, token=" in error.message
    assert "tok-9a7b31-secret" not in error.message
    assert row(conversation).status == Status.ERROR
    assert left_in_container(engine, conversation) == []


def test_a_hung_agent_is_killed_with_its_group_in_the_container(engine, user, dispatched, settings):
    use_profile(settings, turn_timeout_seconds=2)
    conversation = start(engine, user, "hang")
    drive(dispatched)
    error = of(conversation, AgentErrorEvent)[0]
    assert error.code == "acp_turn_timeout", error.message
    assert row(conversation).status == Status.ERROR
    # Its `sleep 600` child was in its group: gone with it.
    assert left_in_container(engine, conversation) == []


def test_garbage_on_stdout_is_a_protocol_error(engine, user, dispatched):
    conversation = start(engine, user, "garbage")
    drive(dispatched)
    error = of(conversation, AgentErrorEvent)[0]
    assert error.code == "acp_protocol_error" and "this is not json" in error.message
    assert left_in_container(engine, conversation) == []


def test_a_command_missing_from_the_image_is_named(engine, user, dispatched, settings):
    settings.CANVAS_ACP_AGENTS = {PROFILE: {"command": "no-such-agent"}}
    conversation = start(engine, user, "full")
    drive(dispatched)
    error = of(conversation, AgentErrorEvent)[0]
    assert error.code == "acp_agent_crashed"
    assert "'no-such-agent' could not start: not found in the container" in error.message


def test_our_agent_in_a_docker_workspace_hands_a_task_to_the_container_agent(engine, dispatched):
    parent = services.conversation_create(
        owner=None, model="scripted", workspace_spec=WorkspaceSpec(kind="docker"),
        prompt=script(
            {"tool": "task", "args": {"subagent_type": PROFILE, "prompt": "env",
                                      "description": "hand it over"}},
            {"tool": "finish", "args": {"message": "parent done"}},
        ),
    )  # fmt: skip
    engine.made.append(str(parent.pk))
    drive(dispatched)
    child = Conversation.objects.get(parent=parent)
    engine.made.append(str(child.pk))
    assert (child.agent, child.status) == (PROFILE, "finished")
    assert child.workspace_path == row(parent).workspace_path  # its own container, same folder
    result = next(o for o in of(parent, ObservationEvent) if o.tool == "task")
    assert "PATH" in result.content.split() and not result.is_error
    assert row(parent).status == Status.FINISHED
