"""An external agent's private home (issue 23, item 7; kept across turns since issue 28): it
holds what the agent keeps at home, its sessions and its API key included (Codex's shell
snapshots), so it lives in its conversation's state folder, no other conversation's sandbox
sees it, and it never outlives its conversation: deleting the conversation removes it, and the
sweeper removes an archived or vanished conversation's.

A home is staged as a turn leaves it: made by agent_home_prepare with a key file inside, and
no run holding the conversation's lease."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from conversations.events import AgentMessageEvent, Status
from conversations.models import Conversation
from orchestration.erase import conversation_delete
from orchestration.external.home import (
    HOME_NAME,
    MARKERS,
    agent_home,
    agent_home_prepare,
    agent_homes_sweep,
)
from tests.acp_bridge.turns import of, row, start, use_fixture
from tests.runs import drive
from workspaces.base import WorkspaceUnavailable

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "sk-proj-agent-home-key-0123456789"


@pytest.fixture(autouse=True)
def fixture_agent(settings) -> None:
    use_fixture(settings)


def _left_by_a_crash(conversation: Conversation) -> Path:
    """The home as a turn makes it, with what Codex leaves in it, and the worker gone."""
    home = agent_home_prepare(str(conversation.pk), workspace=Path(conversation.workspace_path))
    snapshots = home / ".codex" / "shell_snapshots"
    snapshots.mkdir(parents=True)
    (snapshots / "snapshot.sh").write_text(f"export OPENAI_API_KEY={KEY}\n")
    return home


def _stopped(user) -> Conversation:
    conversation = start(user, "stream")
    Conversation.objects.filter(pk=conversation.pk).update(status=Status.PAUSED)
    return row(conversation)


def _markers(settings) -> list[str]:
    folder = Path(settings.CANVAS_STATE_ROOT) / MARKERS
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_the_home_lives_in_the_state_folder_and_stays_for_the_next_turn(user, dispatched, settings):
    conversation = start(user, "escape /nonexistent")
    drive(dispatched)
    report = json.loads(of(conversation, AgentMessageEvent)[-1].text)
    written = [path for path, what in report["writes"].items() if path.endswith("/home-ok")]
    assert len(written) == 1 and report["writes"][written[0]] == "written"
    home = Path(written[0]).parent
    assert home == agent_home(str(conversation.pk))
    assert home == Path(settings.CANVAS_STATE_ROOT) / str(conversation.pk) / HOME_NAME
    assert not home.is_relative_to(Path(row(conversation).workspace_path))
    assert (home / "home-ok").is_file()  # kept: the agent's sessions are there
    assert home.stat().st_mode & 0o777 == 0o700
    assert _markers(settings) == [str(conversation.pk)]
    assert agent_homes_sweep() == 0


def _archived(conversation: Conversation) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(archived_at=timezone.now())


def test_an_archived_conversations_home_is_removed_by_the_sweep(user, settings):
    conversation = _stopped(user)
    home = _left_by_a_crash(conversation)
    assert home.stat().st_mode & 0o777 == 0o700
    assert _markers(settings) == [str(conversation.pk)]
    assert agent_homes_sweep() == 0  # its next turn may load a session from it
    _archived(conversation)
    assert agent_homes_sweep() == 1
    assert not home.exists()
    assert _markers(settings) == []
    assert agent_homes_sweep() == 0


def test_a_home_whose_run_holds_a_live_lease_is_kept_until_the_lease_lapses(user, settings):
    conversation = _stopped(user)
    home = _left_by_a_crash(conversation)
    _archived(conversation)
    rows = Conversation.objects.filter(pk=conversation.pk)
    rows.update(
        lease_token="a-live-runner", lease_expires_at=timezone.now() + timedelta(seconds=60)
    )
    assert agent_homes_sweep() == 0
    assert (home / ".codex" / "shell_snapshots" / "snapshot.sh").read_text().endswith(f"{KEY}\n")
    # The worker died: its lease is not renewed and lapses.
    rows.update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert agent_homes_sweep() == 1
    assert not home.exists()


def test_a_home_whose_conversation_is_gone_is_removed(settings):
    orphan = str(uuid.uuid4())
    home = agent_home_prepare(orphan, workspace=Path(settings.CANVAS_WORKSPACES_ROOT) / "x")
    (home / "key").write_text(KEY)
    (Path(settings.CANVAS_STATE_ROOT) / MARKERS / "not-a-conversation").write_text("")
    assert agent_homes_sweep() == 1
    assert not home.exists()
    assert _markers(settings) == ["not-a-conversation"]  # never touched: not ours


def test_deleting_a_conversation_removes_its_home(
    user, settings, django_capture_on_commit_callbacks
):
    conversation = _stopped(user)
    home = _left_by_a_crash(conversation)
    with django_capture_on_commit_callbacks(execute=True):
        conversation_delete(conversation_id=conversation.pk, by=user)
    assert not home.exists()
    assert not home.parent.exists()  # the state folder it lived in
    assert _markers(settings) == []


def test_another_conversations_agent_cannot_reach_the_home(user, dispatched):
    victim = _stopped(user)
    home = _left_by_a_crash(victim)
    attacker = start(user, f"escape {home}")
    drive(dispatched)
    report = json.loads(of(attacker, AgentMessageEvent)[-1].text)
    assert report["writes"][f"{home}/escaped"].startswith("error")
    assert not (home / "escaped").exists()
    assert sorted(p.name for p in home.iterdir()) == [".codex"]


def test_a_state_root_inside_the_workspaces_root_is_refused(user, settings, tmp_path):
    settings.CANVAS_STATE_ROOT = Path(settings.CANVAS_WORKSPACES_ROOT) / "state"
    with pytest.raises(WorkspaceUnavailable, match="inside a workspace"):
        agent_home_prepare(str(uuid.uuid4()), workspace=tmp_path / "elsewhere")


def test_the_beat_sweep_removes_a_dead_workers_home(user, settings, dispatched):
    """What removes it in a deployment: beat's periodic orchestration.sweep_runs."""
    from orchestration.tasks import sweep_runs

    conversation = _stopped(user)
    home = _left_by_a_crash(conversation)
    _archived(conversation)
    sweep_runs()
    assert not home.exists() and _markers(settings) == []
