"""Warm agents and real resume (issue 28), against the fixture agent in its sandbox, turns
driven in this process: the agent a turn leaves in the pool answers the next message (same
process, same session), goes when idle past its profile's limit, when it failed, when its
launch changed, past the count limit, or when its conversation was archived or deleted; once it is gone (a worker restart) the next
turn loads the session from the home kept across turns. And what an external agent writes
shows in the Changes API, against the baseline its first turn took."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conversations.events import AcpSessionEvent, AgentMessageEvent, Status
from orchestration import services
from orchestration.archive import conversation_archive
from orchestration.external import pool
from orchestration.external.home import agent_home, agent_homes_sweep
from tests.acp_bridge.turns import of, row, start, use_fixture
from tests.api import call
from tests.conftest import wait_for
from tests.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fixture_agent(settings) -> None:
    use_fixture(settings, env={"FIXTURE_LOAD": "1"})


def _echo(conversation) -> dict:
    return json.loads(of(conversation, AgentMessageEvent)[-1].text)


def _say(user, conversation, text: str, dispatched) -> None:
    services.conversation_post_message(conversation_id=conversation.pk, text=text, sender=user)
    drive(dispatched)


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def test_a_second_message_goes_to_the_same_process_and_session(user, dispatched):
    conversation = start(user, "echo")
    drive(dispatched)
    first = _echo(conversation)
    kept = pool.kept_agent(str(conversation.pk))
    assert kept is not None and kept.session_id == first["session"]
    pid = kept.agent.pid
    assert pid is not None and _alive(pid)

    _say(user, conversation, "echo", dispatched)
    second = _echo(conversation)
    assert pool.kept_agent(str(conversation.pk)).agent.pid == pid
    # Same session, not loaded (never left the process), sent only the new message.
    assert second == {"session": first["session"], "loaded": False, "prompt": "echo"}
    assert [s.how for s in of(conversation, AcpSessionEvent)] == ["new"]
    assert row(conversation).status == Status.FINISHED


def test_the_profiles_idle_limit_closes_the_agent_and_its_session_loads_again(
    user, dispatched, settings
):
    use_fixture(settings, env={"FIXTURE_LOAD": "1"}, idle_timeout_seconds=1)
    conversation = start(user, "echo")
    drive(dispatched)
    pid = pool.kept_agent(str(conversation.pk)).agent.pid
    wait_for(lambda: pool.kept_count() == 0, 10, message="the idle agent to be closed")
    wait_for(lambda: not _alive(pid), 10, message="the idle agent's process to end")

    _say(user, conversation, "echo", dispatched)
    assert [s.how for s in of(conversation, AcpSessionEvent)] == ["new", "loaded"]
    assert _echo(conversation)["loaded"] is True


def test_after_a_restart_the_kept_home_lets_session_load_succeed(user, dispatched):
    conversation = start(user, "echo")
    drive(dispatched)
    first = _echo(conversation)
    home = agent_home(str(conversation.pk))
    assert (home / ".fixture-sessions" / first["session"]).is_file()  # kept after the turn
    pool.close_all()  # what a worker's shutdown does: the agent is gone, its home is not

    _say(user, conversation, "echo", dispatched)
    sessions = of(conversation, AcpSessionEvent)
    assert [s.how for s in sessions] == ["new", "loaded"]
    assert sessions[1].session_id == first["session"]
    assert _echo(conversation) == {"session": first["session"], "loaded": True, "prompt": "echo"}
    # What the agent replays while loading is already in the log: not recorded twice.
    assert "replayed" not in [e.text for e in of(conversation, AgentMessageEvent)]

    # On a worker without the home (another host, no shared storage): the transcript.
    pool.close_all()
    shutil.rmtree(home)
    _say(user, conversation, "echo", dispatched)
    assert [s.how for s in of(conversation, AcpSessionEvent)][-1] == "replayed"
    report = _echo(conversation)
    assert report["session"] != first["session"] and "User: echo" in report["prompt"]


def test_a_failed_or_relaunched_agent_is_not_reused(user, dispatched, settings):
    broken = start(user, "garbage")
    drive(dispatched)
    assert row(broken).status == Status.ERROR
    assert pool.kept_agent(str(broken.pk)) is None

    conversation = start(user, "echo")
    drive(dispatched)
    pid = pool.kept_agent(str(conversation.pk)).agent.pid
    use_fixture(settings, env={"FIXTURE_LOAD": "1", "OTHER": "value"})  # a new launch
    _say(user, conversation, "echo", dispatched)
    assert not _alive(pid)
    assert pool.kept_agent(str(conversation.pk)).agent.pid != pid
    assert [s.how for s in of(conversation, AcpSessionEvent)] == ["new", "loaded"]


def test_archiving_closes_the_agent_and_the_sweep_removes_its_home(user, dispatched):
    conversation = start(user, "echo")
    drive(dispatched)
    pid = pool.kept_agent(str(conversation.pk)).agent.pid
    home = agent_home(str(conversation.pk))
    assert agent_homes_sweep() == 0 and home.is_dir()  # a live conversation keeps its home
    conversation_archive(conversation_id=conversation.pk, by=user)
    assert pool.close_closed() == 1  # what the pool's reaper does every period
    assert not _alive(pid) and pool.kept_count() == 0
    assert agent_homes_sweep() == 1
    assert not home.exists()


def test_the_changes_api_shows_what_the_agent_wrote(user, api, dispatched):
    conversation = start(user, "write notes/made.txt one two")
    workspace = Path(row(conversation).workspace_path)
    drive(dispatched)
    assert (workspace / "notes" / "made.txt").read_text() == "one two"
    status, body = call(api, "get", f"/api/conversations/{conversation.pk}/changes")
    assert status == 200
    assert body == {
        "files": [{"path": "notes/made.txt", "status": "added", "added": 1, "removed": 0}]
    }
    status, diff = call(
        api, "get", f"/api/conversations/{conversation.pk}/diff?path=notes/made.txt"
    )
    assert status == 200 and diff["status"] == "added" and "+one two" in diff["diff"]
    # A command the agent ran in a terminal on the next (warm) turn counts as well.
    _say(user, conversation, "terminal 1000 cp notes/made.txt copy.txt", dispatched)
    assert (workspace / "copy.txt").read_text() == "one two"
    status, body = call(api, "get", f"/api/conversations/{conversation.pk}/changes")
    assert [(f["path"], f["status"]) for f in body["files"]] == [
        ("copy.txt", "added"), ("notes/made.txt", "added"),
    ]  # fmt: skip


def test_past_the_count_limit_the_oldest_goes_and_so_does_a_deleted_ones(
    user, dispatched, monkeypatch, django_capture_on_commit_callbacks
):
    from orchestration.erase import conversation_delete

    monkeypatch.setattr(pool, "MAX_KEPT", 1)
    older, newer = start(user, "echo"), start(user, "echo")
    drive(dispatched)
    assert pool.kept_count() == 1 and pool.kept_agent(str(older.pk)) is None
    pid = pool.kept_agent(str(newer.pk)).agent.pid
    with django_capture_on_commit_callbacks(execute=True):
        conversation_delete(conversation_id=newer.pk, by=user)
    assert pool.close_closed() == 1
    assert not _alive(pid) and pool.kept_count() == 0
