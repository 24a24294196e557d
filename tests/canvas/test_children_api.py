"""The API of the agent tree: a conversation's direct children, Stop on a subtree, and the
list's `parent` and `top_level` filters."""

from __future__ import annotations

import pytest

from common.errors import Conflict
from conversations.models import Conversation
from orchestration import run_control
from teams.models import Role
from teams.services import member_add, team_default_for
from tests.factories import make_conversation

pytestmark = pytest.mark.django_db


def child(parent: Conversation, name: str, **fields) -> Conversation:
    return make_conversation(
        owner=parent.owner, team=parent.team, parent=parent, name=name,
        parent_action_id=f"call-{name}", **fields,
    )  # fmt: skip


@pytest.fixture
def rows(user) -> dict[str, Conversation]:
    root = make_conversation(owner=user, title="root")
    first = child(root, "first", subagent_type="general", status="running", steps=4)
    return {
        "root": root,
        "first": first,
        "grandchild": child(first, "grandchild", subagent_type="general"),
        "second": child(root, "second", subagent_type="explore", status="finished"),
    }


def test_children_lists_direct_children_oldest_first(api, rows):
    Conversation.objects.filter(pk=rows["first"].pk).update(cost_usd="0.25")
    answer = api.get(f"/api/conversations/{rows['root'].pk}/children")
    assert answer.status_code == 200
    assert answer.json() == {
        "children": [
            {
                "id": str(rows["first"].pk), "name": "first", "subagent_type": "general",
                "status": "running", "steps": 4, "cost_usd": 0.25,
                "parent_action_id": "call-first",
            },
            {
                "id": str(rows["second"].pk), "name": "second", "subagent_type": "explore",
                "status": "finished", "steps": 0, "cost_usd": 0.0,
                "parent_action_id": "call-second",
            },
        ]
    }  # fmt: skip
    leaf = api.get(f"/api/conversations/{rows['grandchild'].pk}/children").json()
    assert leaf == {"children": []}


def test_children_of_another_teams_conversation_are_not_found(client, rows, other_user):
    client.force_login(other_user)
    assert client.get(f"/api/conversations/{rows['root'].pk}/children").status_code == 404
    assert client.post(f"/api/conversations/{rows['first'].pk}/stop").status_code == 404


def test_stop_calls_the_service_and_answers_the_status(api, rows, user, monkeypatch):
    calls = []

    def stop(**kw):
        calls.append(kw)
        Conversation.objects.filter(pk=kw["conversation_id"]).update(status="paused")

    monkeypatch.setattr(run_control, "conversation_stop", stop, raising=False)
    answer = api.post(f"/api/conversations/{rows['first'].pk}/stop")
    assert answer.status_code == 200 and answer.json() == {"status": "paused"}
    assert calls == [{"conversation_id": rows["first"].pk, "by": user}]


def test_stop_with_nothing_active_is_a_409(api, rows, monkeypatch):
    def refuse(**_):
        raise Conflict("nothing in this subtree is running.")

    monkeypatch.setattr(run_control, "conversation_stop", refuse, raising=False)
    answer = api.post(f"/api/conversations/{rows['second'].pk}/stop")
    assert answer.status_code == 409
    assert "nothing in this subtree is running" in answer.content.decode()


def test_a_viewer_may_read_children_but_not_stop(client, rows, user, django_user_model):
    viewer = django_user_model.objects.create_user("vic", password="vic-password-1")
    member_add(by=user, team=team_default_for(user), username="vic", role=Role.VIEWER)
    client.force_login(viewer)
    assert client.get(f"/api/conversations/{rows['root'].pk}/children").status_code == 200
    assert client.post(f"/api/conversations/{rows['first'].pk}/stop").status_code == 403


def test_the_list_shows_everything_by_default_and_filters_by_level(api, rows):
    everything = api.get("/api/conversations").json()
    assert {c["id"] for c in everything} == {str(r.pk) for r in rows.values()}
    top = api.get("/api/conversations", {"top_level": "true"}).json()
    assert [c["id"] for c in top] == [str(rows["root"].pk)]
    kids = api.get("/api/conversations", {"parent": str(rows["root"].pk)}).json()
    assert {c["id"] for c in kids} == {str(rows["first"].pk), str(rows["second"].pk)}
    assert all(c["parent_id"] == str(rows["root"].pk) for c in kids)
    # Combined with the other filters.
    running = api.get("/api/conversations", {"parent": str(rows["root"].pk), "status": "running"})
    assert [c["id"] for c in running.json()] == [str(rows["first"].pk)]
    bad = api.get("/api/conversations", {"parent": "nope"})
    assert bad.status_code == 400 and "parent: not a conversation id" in bad.content.decode()


def test_stop_of_a_subtree_with_nothing_active_is_refused_by_the_service(api, user):
    done = make_conversation(owner=user, status="finished")
    child(done, "also-done", status="finished")
    answer = api.post(f"/api/conversations/{done.pk}/stop")
    assert answer.status_code == 409
    assert "nothing to stop" in answer.content.decode()
