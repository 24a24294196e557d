"""Forking a conversation: its log up to a quiet point and a copy of its folder, through the
service, the API, and a run that continues the fork while the source stays as it was."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.test import Client

from common.errors import InvalidInput
from conversations import store
from conversations.events import (
    AcpPromptEvent,
    AcpSessionEvent,
    AcpTurnEvent,
    ActionEvent,
    ChildSpawn,
    ObservationEvent,
    StatusChangeEvent,
    SubagentsSettledEvent,
    SubagentsSpawnedEvent,
    UserMessageEvent,
)
from conversations.models import Conversation
from orchestration import services
from orchestration.fork import conversation_fork, quiet_points
from tests.factories import make_conversation
from tests.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)


def _script() -> str:
    return json.dumps({"script": [
        {"tool": "terminal", "args": {"command": "echo one > a.txt", "security_risk": "LOW"}},
        {"tool": "terminal", "args": {"command": "echo two > b.txt", "security_risk": "LOW"}},
        {"tool": "finish", "args": {"message": "both written"}},
    ]})  # fmt: skip


@pytest.fixture
def finished(user, dispatched) -> Conversation:
    conversation = services.conversation_create(owner=user, model="scripted", prompt=_script())
    drive(dispatched)
    conversation.refresh_from_db()
    assert conversation.status == "finished"
    return conversation


def _seq_of_first(conversation_id, kind) -> int:
    return next(s.seq for s in store.load(conversation_id) if isinstance(s.event, kind))


def test_a_fork_copies_the_log_up_to_the_cut_and_the_folder(user, finished):
    cut = _seq_of_first(finished.pk, ObservationEvent)
    fork = conversation_fork(source=finished, by=user, at_seq=cut)
    source_events = [s.event for s in store.load(finished.pk) if s.seq <= cut]
    copied = [s.event for s in store.load(fork.pk)]
    assert [e.id for e in copied[:-1]] == [e.id for e in source_events]
    assert all(getattr(e, "usage", None) is None for e in copied)
    last = copied[-1]
    assert isinstance(last, StatusChangeEvent) and f"at event {cut}" in last.reason
    assert fork.status == "paused" and fork.forked_from_id == finished.pk
    assert (fork.cost_usd, fork.title) == (0, f"{finished.title} (fork)")
    assert Path(fork.workspace_path, "a.txt").read_text() == "one\n"
    assert fork.workspace_path != finished.workspace_path


def test_a_fork_continues_on_its_own_and_leaves_the_source_alone(user, finished, dispatched):
    cut = _seq_of_first(finished.pk, ObservationEvent)
    before = [s.event.id for s in store.load(finished.pk)]
    fork = conversation_fork(source=finished, by=user, at_seq=cut)
    Path(fork.workspace_path, "b.txt").unlink()
    services.conversation_post_message(conversation_id=fork.pk, text="go on", sender=user)
    drive(dispatched)
    fork.refresh_from_db()
    assert fork.status == "finished"
    # The scripted model plays on from its second turn: the fork wrote b.txt again.
    assert Path(fork.workspace_path, "b.txt").read_text() == "two\n"
    assert [s.event.id for s in store.load(finished.pk)] == before
    assert Path(finished.workspace_path, "b.txt").exists()


def test_a_cut_inside_a_tool_call_is_refused_naming_the_quiet_point_before_it(user, finished):
    action = _seq_of_first(finished.pk, ActionEvent)
    with pytest.raises(InvalidInput, match=rf"fork at event {action - 1}\b"):
        conversation_fork(source=finished, by=user, at_seq=action)
    with pytest.raises(InvalidInput, match="between 1 and"):
        conversation_fork(source=finished, by=user, at_seq=finished.last_seq + 1)
    assert Conversation.objects.count() == 1


def test_the_default_cut_is_the_end_and_keeps_a_resting_status(user, finished):
    fork = conversation_fork(source=finished, by=user)
    assert fork.status == "finished"
    assert fork.last_seq == finished.last_seq + 1


def test_a_workspace_over_the_limit_is_refused_and_leaves_nothing(user, finished, settings):
    settings.CANVAS_FORK_MAX_BYTES = 3
    with pytest.raises(InvalidInput, match="CANVAS_FORK_MAX_BYTES"):
        conversation_fork(source=finished, by=user)
    assert Conversation.objects.count() == 1
    area = Path(finished.workspace_path).parent
    assert sorted(p.name for p in area.iterdir()) == [Path(finished.workspace_path).name]


def test_pipes_are_skipped_and_symlinks_stay_links(user, finished):
    root = Path(finished.workspace_path)
    os.mkfifo(root / "pipe")
    (root / "link").symlink_to("/etc/passwd")
    fork = conversation_fork(source=finished, by=user)
    copied = Path(fork.workspace_path)
    assert not (copied / "pipe").exists()
    assert (copied / "link").is_symlink() and os.readlink(copied / "link") == "/etc/passwd"


def test_an_external_agents_session_is_not_copied(user, team):
    source = make_conversation(user, team, agent="probe", workspace_path="")
    prompt = UserMessageEvent(text="hi")
    store.append(source.pk, [
        prompt, AcpSessionEvent(agent="probe", session_id="s-1"),
        AcpPromptEvent(message_ids=[prompt.id]), AcpTurnEvent(stop_reason="end_turn"),
    ])  # fmt: skip
    source.refresh_from_db()
    from teams.policies import policy_update

    policy_update(by=user, team=team, allowed_agent_kinds=["acp:probe", "native"])
    fork = conversation_fork(source=source, by=user)
    kinds = [type(s.event) for s in store.load(fork.pk)]
    assert AcpSessionEvent not in kinds and AcpTurnEvent in kinds


def test_a_condensations_window_is_renumbered_in_the_fork(user, team):
    """The fork numbers its copies from 1 and leaves events out: where a condensation says its
    View starts must follow, or a cold reader of the fork would read the wrong window."""
    from conversations.events import CondensationEvent, SystemPromptEvent
    from conversations.view import llm_view
    from orchestration.step.history import History

    source = make_conversation(user, team, agent="probe", workspace_path="")
    task = UserMessageEvent(text="the task")
    turns = [UserMessageEvent(text=f"turn {n}") for n in range(6)]
    written = store.append(source.pk, [
        SystemPromptEvent(content="be useful"), AcpSessionEvent(agent="probe", session_id="s"),
        task, AcpSessionEvent(agent="probe", session_id="s2"), *turns,
    ])  # fmt: skip
    seq = {s.event.id: s.seq for s in written}
    store.append(source.pk, [CondensationEvent(
        forgotten_ids=[t.id for t in turns[:4]], summary="four turns", offset=2,
        kept_head_seqs=[1, seq[task.id]], kept_from_seq=seq[turns[4].id],
    )])  # fmt: skip
    source.refresh_from_db()
    from teams.policies import policy_update

    policy_update(by=user, team=team, allowed_agent_kinds=["acp:probe", "native"])
    fork = conversation_fork(source=source, by=user)
    log = store.load(fork.pk)
    condensation = next(s.event for s in log if isinstance(s.event, CondensationEvent))
    new_seq = {s.event.id: s.seq for s in log}
    assert condensation.kept_head_seqs == [1, new_seq[task.id]] == [1, 2]
    assert condensation.kept_from_seq == new_seq[turns[4].id]
    cold = History.loaded(store.load_window(fork.pk))
    assert [e.id for e in cold.view] == [e.id for e in llm_view(s.event for s in log)]
    assert [getattr(e, "text", None) for e in cold.view][1:] == [
        "the task", None, "turn 4", "turn 5",
    ]  # fmt: skip


def test_quiet_points_wait_for_results_rounds_and_turns():
    call = ActionEvent(tool_call_id="c1", tool="task", arguments="{}")
    child = ChildSpawn(conversation_id="x", name="a", subagent_type="general")
    events = [
        UserMessageEvent(text="go"),  # 1 quiet
        call,  # 2
        SubagentsSpawnedEvent(tool_call_id="c1", tool="task", children=[child]),  # 3
        ObservationEvent(tool_call_id="c1", tool="task", content="spawned"),  # 4: round open
        SubagentsSettledEvent(tool_call_id="c1", results=[]),  # 5 quiet
        AcpPromptEvent(message_ids=[]),  # 6
        AcpTurnEvent(stop_reason="end_turn"),  # 7 quiet
    ]
    assert quiet_points(list(enumerate(events, start=1))) == [1, 5, 7]


def test_the_api_forks_and_other_teams_cannot(user, other_user, finished):
    client = Client()
    client.force_login(user)
    answer = client.post(f"/api/conversations/{finished.pk}/fork", {"title": "plan B"},
                         content_type="application/json")  # fmt: skip
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert (body["title"], body["forked_from"]) == ("plan B", str(finished.pk))
    inside = _seq_of_first(finished.pk, ActionEvent)
    refused = client.post(f"/api/conversations/{finished.pk}/fork", {"at_seq": inside},
                          content_type="application/json")  # fmt: skip
    assert refused.status_code == 400 and "fork at event" in refused.json()["detail"]
    stranger = Client()
    stranger.force_login(other_user)
    denied = stranger.post(f"/api/conversations/{finished.pk}/fork", {},
                           content_type="application/json")  # fmt: skip
    assert denied.status_code == 404


def test_a_forks_changes_start_as_the_sources(user, finished, dispatched):
    """The fork copies the source's baseline with its folder: its Changes list what the source
    had changed (not "no changes"), then what the fork itself changes."""
    from orchestration.workspace import workspace_of

    fork = conversation_fork(source=finished, by=user)
    listed = [(c.path, c.status) for c in workspace_of(fork).changes()]
    assert listed == [("a.txt", "added"), ("b.txt", "added")]
    assert listed == [(c.path, c.status) for c in workspace_of(finished).changes()]
    Path(fork.workspace_path, "a.txt").unlink()
    assert [c.path for c in workspace_of(fork).changes()] == ["b.txt"]
    assert [c.path for c in workspace_of(finished).changes()] == ["a.txt", "b.txt"]
