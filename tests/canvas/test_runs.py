"""The team's runs (canvas.runs): every active and recent conversation, automation run and
sub-agent of one team and never another's, with status in words, who started it, what it waits
for; the filters; the Runs page, its API and its socket's table frames; deciding from a list
(the Runs rows and the inbox) through the conversation's approval endpoints."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from automations.models import AutomationRun
from canvas.asgi import application
from canvas.runs import RunFilters, team_runs
from canvas.runs_consumer import table_frame
from canvas.templatetags.runs import duration_text
from conversations import store
from conversations.events import ActionEvent, Status, StatusChangeEvent
from conversations.models import Conversation
from teams.models import Role
from teams.services import member_add, team_default_for
from tests.api import call, client_for
from tests.canvas.test_ui_consumer import session_headers
from tests.factories import make_conversation

pytestmark = pytest.mark.django_db


def _hold(conversation, command: str = "sudo ls") -> ActionEvent:
    held = ActionEvent(
        tool_call_id=f"call-{command}", tool="terminal",
        arguments=json.dumps({"command": command}), risk="HIGH", risk_rules=["sudo"],
        requires_confirmation=True,
    )  # fmt: skip
    store.append(
        conversation.pk,
        [held, StatusChangeEvent(status=Status.WAITING_FOR_CONFIRMATION, previous=Status.RUNNING)],
    )
    return held


@pytest.fixture
def runs(user, team, django_user_model, dispatched):
    """In alice's team: her finished conversation, bob's conversation waiting for its two
    sub-agents (one waiting for approval), an automation's run with a conversation and one
    skipped without; in mallory's team, her own running conversation waiting for approval."""
    from automations import services

    bob = django_user_model.objects.create_user("bob")
    member_add(by=user, team=team, username="bob", role=Role.MEMBER)
    done = make_conversation(owner=user, team=team, title="Done one", status=Status.FINISHED)
    parent = make_conversation(
        owner=bob, team=team, title="Bob's parent", status=Status.WAITING_FOR_SUBAGENTS
    )
    waiting_child = make_conversation(
        owner=bob, team=team, parent=parent, name="checker", status=Status.RUNNING
    )
    held = _hold(waiting_child)
    finished_child = make_conversation(
        owner=bob, team=team, parent=parent, name="writer", status=Status.FINISHED
    )
    automation = services.automation_create(
        by=user, team=team, name="nightly", trigger="webhook", prompt_template="x",
        model="scripted",
    ).automation  # fmt: skip
    started = make_conversation(owner=user, team=team, title="Nightly run", status=Status.RUNNING)
    AutomationRun.objects.create(
        automation=automation, trigger="webhook", delivery_key="k1", status="started",
        conversation=started,
    )  # fmt: skip
    skipped = AutomationRun.objects.create(
        automation=automation, trigger="webhook", delivery_key="k2", status="skipped"
    )
    return {
        "bob": bob, "done": done, "parent": parent, "waiting_child": waiting_child,
        "held": held, "finished_child": finished_child, "started": started,
        "skipped": skipped, "automation": automation,
    }  # fmt: skip


@pytest.fixture
def theirs(other_user, dispatched):
    conversation = make_conversation(
        owner=other_user, team=team_default_for(other_user), title="Mallory's secret run",
        status=Status.RUNNING,
    )  # fmt: skip
    _hold(conversation, "sudo cat /etc/shadow")
    child = make_conversation(
        owner=other_user, team=conversation.team, parent=conversation, status=Status.RUNNING
    )
    return {"conversation": conversation, "child": child}


def _by_key(result) -> dict:
    return {row.key: row for row in result.rows()}


def test_every_run_of_the_team_and_none_of_another(team, runs, theirs):
    with CaptureQueriesContext(connection) as queries:
        result = team_runs(team.pk)
    assert len(queries) <= 10, [q["sql"][:90] for q in queries]
    rows = _by_key(result)
    keys = set(rows)
    ours = {
        f"c-{runs[n].pk}" for n in ("done", "parent", "waiting_child", "finished_child", "started")
    }
    assert keys == ours | {f"a-{runs['skipped'].pk}"}
    for mallorys in (theirs["conversation"], theirs["child"]):
        assert f"c-{mallorys.pk}" not in keys
    assert "Mallory" not in json.dumps([r.title for r in rows.values()])
    # Mallory's team sees hers and nothing of alice's.
    assert {r.key for r in team_runs(theirs["conversation"].team_id).rows()} == {
        f"c-{theirs['conversation'].pk}", f"c-{theirs['child'].pk}"
    }  # fmt: skip


def test_rows_say_status_starter_and_what_they_wait_for(team, runs):
    rows = _by_key(team_runs(team.pk))
    parent = rows[f"c-{runs['parent'].pk}"]
    assert (parent.kind, parent.started_by_kind, parent.started_by) == (
        "conversation",
        "person",
        "bob",
    )
    assert parent.status_label == "Waiting for sub-agents"
    assert (parent.waiting_kind, parent.waiting_for) == (
        "children",
        "Sub-agents: 1 of 2 still going",
    )
    child = rows[f"c-{runs['waiting_child'].pk}"]
    assert (child.kind, child.depth, child.started_by_kind) == ("subagent", 1, "parent")
    assert child.started_by == "Bob's parent" and child.person == "bob"
    assert child.status_label == "Waiting for approval" and child.waiting_kind == "approval"
    assert [c.action_id for c in child.pending] == [runs["held"].id]
    assert child.pending[0].summary == "sudo ls"
    started = rows[f"c-{runs['started'].pk}"]
    assert (started.kind, started.started_by_kind, started.started_by) == (
        "automation", "automation", "nightly"
    )  # fmt: skip
    skipped = rows[f"a-{runs['skipped'].pk}"]
    assert (skipped.status_label, skipped.conversation_id, skipped.title) == (
        "Skipped", None, f"nightly #{runs['skipped'].pk}"
    )  # fmt: skip
    # The tree reads root first, then its children oldest first.
    order = [r.key for r in team_runs(team.pk).rows()]
    at = order.index(f"c-{runs['parent'].pk}")
    assert order[at + 1 : at + 3] == [
        f"c-{runs['waiting_child'].pk}", f"c-{runs['finished_child'].pk}"
    ]  # fmt: skip


def test_filters_keep_whole_entries(team, runs):
    def roots(**filters) -> set[str]:
        return {e.root.key for e in team_runs(team.pk, RunFilters(**filters)).entries}

    parent, done = f"c-{runs['parent'].pk}", f"c-{runs['done'].pk}"
    started, skipped = f"c-{runs['started'].pk}", f"a-{runs['skipped'].pk}"
    assert roots(status="approval") == {parent}  # its child waits
    assert roots(status="active") == {parent, started}
    assert roots(status="finished") == {done, parent}  # a finished child counts too
    assert roots(status="stopped") == {skipped}
    assert roots(kind="automation") == {started, skipped}
    assert roots(kind="subagents") == {parent}
    assert roots(kind="conversation") == {done, parent}
    assert roots(person="bob") == {parent}
    with pytest.raises(ValueError, match="status must be one of"):
        RunFilters(status="bogus")


def test_an_active_run_is_listed_past_the_limit(team, runs):
    result = team_runs(team.pk, limit=1)
    keys = {e.root.key for e in result.entries}
    assert {f"c-{runs['parent'].pk}", f"c-{runs['started'].pk}"} <= keys
    assert f"c-{runs['done'].pk}" not in keys


def test_the_page_lists_rows_with_approve_and_reject(browser, team, runs, theirs):
    page = browser.get(reverse("team-runs", args=[team.pk])).content.decode()
    assert 'aria-current="page">Runs</a>' in page
    assert 'ws-connect="/ws/ui/teams/' in page
    assert "Bob&#x27;s parent" in page and "Waiting for approval" in page
    approve = reverse("action-approve", args=[runs["waiting_child"].pk, runs["held"].id])
    assert f'hx-post="{approve}"' in page and 'name="answer" value="line"' in page
    assert "Mallory" not in page and "shadow" not in page


def test_the_api_gives_the_rows_and_hides_other_teams(api, team, runs, theirs, other_user):
    status, body = call(api, "get", f"/api/teams/{team.pk}/runs?status=approval")
    assert status == 200, body
    keys = [r["key"] for r in body["runs"]]
    assert keys == [f"c-{runs['parent'].pk}", f"c-{runs['waiting_child'].pk}",
                    f"c-{runs['finished_child'].pk}"]  # fmt: skip
    child = body["runs"][1]
    assert child["pending"][0]["action_id"] == runs["held"].id
    assert child["started_by_kind"] == "parent" and child["ended_at"] is None
    assert body["waiting_for_approval"] == 1
    status, bad = call(api, "get", f"/api/teams/{team.pk}/runs?kind=robots")
    assert (status, bad["detail"][0]["field"]) == (400, "kind")
    status, denied = call(client_for(other_user), "get", f"/api/teams/{team.pk}/runs")
    assert (status, denied["error"]) == (404, "not_found")


def test_a_decision_from_a_row_answers_one_line_and_refreshes_the_badge(browser, runs):
    approve = reverse("action-approve", args=[runs["waiting_child"].pk, runs["held"].id])
    answer = browser.post(approve, {"answer": "line"}, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200
    assert json.loads(answer["HX-Trigger"]) == {"approvals-changed": {}}
    assert 'class="decision-line decision-approved"' in answer.content.decode()
    again = browser.post(approve, {"answer": "line"}, HTTP_HX_REQUEST="true")
    assert again.status_code == 409 and "already decided" in again.content.decode()
    assert "approval-card" not in again.content.decode()


def test_a_viewer_sees_rows_but_no_buttons_and_cannot_decide(client, team, runs, django_user_model):
    django_user_model.objects.create_user("vera")
    member_add(by=runs["done"].owner, team=team, username="vera", role=Role.VIEWER)
    client.force_login(django_user_model.objects.get(username="vera"))
    page = client.get(reverse("team-runs", args=[team.pk])).content.decode()
    assert "Waiting for approval" in page and 'name="answer"' not in page
    approve = reverse("action-approve", args=[runs["waiting_child"].pk, runs["held"].id])
    assert client.post(approve, {"answer": "line"}, HTTP_HX_REQUEST="true").status_code == 403


def test_the_inbox_decides_from_the_list_and_leaves_an_unchanged_list_alone(browser, runs):
    page = browser.get(reverse("approvals"))
    html = page.content.decode()
    assert "Open one to decide" not in html and 'class="small primary approve"' in html
    shown = page.context["shown"]
    unchanged = browser.get(reverse("approvals"), {"shown": shown}, HTTP_HX_REQUEST="true")
    assert unchanged.status_code == 204
    changed = browser.get(reverse("approvals"), {"shown": "stale"}, HTTP_HX_REQUEST="true")
    assert changed.status_code == 200
    assert 'id="approvals-count"' in changed.content.decode()  # the badge rides along


def test_table_frames_send_only_what_changed():
    sent = {"run-a": "<tr a1>", "run-b": "<tr b1>"}
    assert table_frame(sent, ["run-a", "run-b"], dict(sent), "BODY") == ("", ["run-a", "run-b"])
    changed = {"run-a": "<tr a1>", "run-b": "<tr b2>"}
    assert table_frame(sent, ["run-a", "run-b"], changed, "BODY") == ("<tr b2>", ["run-a", "run-b"])
    moved = {"run-b": "<tr b1>", "run-a": "<tr a1>"}
    assert table_frame(sent, ["run-a", "run-b"], moved, "BODY") == ("BODY", ["run-b", "run-a"])


def test_durations_read_like_github_actions():
    assert duration_text(timedelta(seconds=45)) == "45s"
    assert duration_text(timedelta(minutes=3, seconds=7)) == "3m 7s"
    assert duration_text(timedelta(hours=2, minutes=5, seconds=9)) == "2h 5m"
    assert duration_text(timedelta(days=3, hours=4)) == "3d 4h"


@pytest.mark.django_db(transaction=True)
async def test_the_socket_sends_the_table_then_only_changed_rows(user, team, runs):
    headers = await database_sync_to_async(session_headers)(user)
    communicator = WebsocketCommunicator(
        application, f"/ws/ui/teams/{team.pk}/runs/", headers=headers
    )
    connected, _ = await communicator.connect()
    assert connected
    first = await communicator.receive_from(timeout=10)
    assert first.strip().startswith('<tbody id="runs-body" hx-swap-oob="true"')
    assert f'id="run-c-{runs["waiting_child"].pk}"' in first
    await database_sync_to_async(store.append)(
        runs["done"].pk, [StatusChangeEvent(status=Status.RUNNING, previous=Status.FINISHED)]
    )
    frame = await communicator.receive_from(timeout=10)
    while f'id="run-c-{runs["done"].pk}"' not in frame:
        frame = await communicator.receive_from(timeout=10)
    assert "runs-body" not in frame and 'hx-swap-oob="true"' in frame
    assert "Running" in frame
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_another_teams_socket_is_refused(other_user, team):
    headers = await database_sync_to_async(session_headers)(other_user)
    communicator = WebsocketCommunicator(
        application, f"/ws/ui/teams/{team.pk}/runs/", headers=headers
    )
    connected, code = await communicator.connect()
    assert not connected and code == 4404


def test_an_archived_run_is_left_out_unless_it_still_runs(team, runs):
    from django.utils import timezone

    Conversation.objects.filter(pk__in=[runs["done"].pk, runs["started"].pk]).update(
        archived_at=timezone.now()
    )
    keys = {e.root.key for e in team_runs(team.pk).entries}
    assert f"c-{runs['done'].pk}" not in keys
    assert f"c-{runs['started'].pk}" in keys  # archived while running: still going on
