"""Issue 8 §2: a team's conversations get workspaces only inside that team's own area, from the
API and from the new-conversation form alike; sharing a folder needs sight of its conversation.

Every bad request is a 400 (never a 500) that creates no conversation and no folder outside the
requesting team's area."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from conversations.models import Conversation
from orchestration.services import conversation_create
from teams.models import Membership, Role, Team
from teams.services import team_default_for
from teams.tokens import api_token_create
from tests.factories import make_conversation

pytestmark = pytest.mark.django_db


def _root() -> Path:
    return Path(settings.CANVAS_WORKSPACES_ROOT).resolve()


def _area(team: Team) -> Path:
    """Where the team's workspaces must live, spelled out here rather than imported, so these
    tests say what the layout is instead of trusting the code under test."""
    return _root() / f"team-{team.pk}"


@pytest.fixture(autouse=True)
def _no_dispatch(dispatched):
    return dispatched


@pytest.fixture
def api(api_token) -> Client:
    return Client(headers={"Authorization": f"Bearer {api_token}"})


@pytest.fixture
def alice_client(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def mallory_conversation(other_user) -> Conversation:
    """Team B's conversation, with a file alice must never reach."""
    conversation = conversation_create(owner=other_user, prompt="team B's plans", model="scripted")
    (Path(conversation.workspace_path) / "plans.txt").write_text("team B only")
    return conversation


def _create(api: Client, workspace: str) -> tuple[int, dict]:
    response = api.post(
        "/api/conversations",
        data=json.dumps({"prompt": "hi", "model": "scripted", "workspace": workspace}),
        content_type="application/json",
    )
    return response.status_code, response.json()


def _bad_names(other: Conversation) -> dict[str, str]:
    """Requests that must be refused, by what they try (built once the other team exists)."""
    return {
        "dot": ".",
        "dotdot": "..",
        "up into the other area": f"../team-{other.team_id}",
        "up into the other conversation": f"../team-{other.team_id}/{other.pk}",
        "the root, relatively": "../",
        "absolute /etc": "/etc",
        "absolute root": str(_root()),
        "absolute other workspace": other.workspace_path,
        "nul byte": "proj\x00ect",
        "1000 characters": "a" * 1000,
        "newline": "proj\nect",
    }


BAD = [
    "dot", "dotdot", "up into the other area", "up into the other conversation",
    "the root, relatively", "absolute /etc", "absolute root", "absolute other workspace",
    "nul byte", "1000 characters", "newline",
]  # fmt: skip


def _nothing_leaked(other: Conversation) -> None:
    assert Conversation.objects.exclude(pk=other.pk).count() == 0
    assert sorted(p.name for p in _root().iterdir()) == [f"team-{other.team_id}"]


@pytest.mark.parametrize("case", BAD)
def test_api_refuses_a_workspace_outside_the_team_area(api, mallory_conversation, case):
    status, error = _create(api, _bad_names(mallory_conversation)[case])
    assert status == 400, error
    assert error["error"] == "invalid_input"
    _nothing_leaked(mallory_conversation)


@pytest.mark.parametrize("case", BAD)
def test_the_form_refuses_the_same_workspaces(alice_client, mallory_conversation, case):
    response = alice_client.post(
        reverse("conversation-new"),
        {"prompt": "hi", "model": "scripted", "workspace": _bad_names(mallory_conversation)[case]},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 400
    page = response.content.decode().strip()
    assert page.startswith('<form id="new-conversation"')
    assert page.count('class="field-error"') == 1  # next to the workspace field
    assert "workspace must be a folder name" in page or "Null characters" in page
    _nothing_leaked(mallory_conversation)


def test_the_default_workspace_is_the_conversation_id_in_the_team_area(api, team):
    status, body = _create(api, "")
    assert status == 201
    stored = Conversation.objects.get(pk=body["id"]).workspace_path
    assert stored == str(_area(team) / body["id"])
    assert Path(stored).is_dir()
    assert body["workspace"] == body["id"]  # the name to pass again to share it


def test_a_named_workspace_lands_in_the_team_area(api, team):
    status, body = _create(api, "project-a")
    assert status == 201
    assert Conversation.objects.get(pk=body["id"]).workspace_path == str(_area(team) / "project-a")
    assert body["workspace"] == "project-a"


def test_another_teams_conversation_id_names_a_folder_of_ones_own(api, team, mallory_conversation):
    status, body = _create(api, str(mallory_conversation.pk))
    assert status == 201
    mine = Path(Conversation.objects.get(pk=body["id"]).workspace_path)
    assert mine == _area(team) / str(mallory_conversation.pk)
    assert mine != Path(mallory_conversation.workspace_path)
    assert not (mine / "plans.txt").exists()


def test_another_teams_area_name_names_a_folder_of_ones_own(api, team, mallory_conversation):
    status, body = _create(api, f"team-{mallory_conversation.team_id}")
    assert status == 201
    mine = Path(Conversation.objects.get(pk=body["id"]).workspace_path)
    assert mine == _area(team) / f"team-{mallory_conversation.team_id}"
    assert not list(mine.iterdir())


@pytest.mark.parametrize("target", ["other workspace", "other area", "root"])
def test_a_symlink_in_the_team_area_cannot_lead_out_of_it(
    api, alice_client, team, mallory_conversation, target
):
    _area(team).mkdir(parents=True, exist_ok=True)
    link = _area(team) / "escape"
    link.symlink_to(
        {
            "other workspace": Path(mallory_conversation.workspace_path),
            "other area": _area(mallory_conversation.team),
            "root": _root(),
        }[target]
    )
    status, error = _create(api, "escape")
    assert status == 400, error
    assert "outside" in error["detail"]
    response = alice_client.post(
        reverse("conversation-new"), {"prompt": "hi", "model": "scripted", "workspace": "escape"}
    )
    assert response.status_code == 400
    assert b"outside" in response.content
    assert Conversation.objects.exclude(pk=mallory_conversation.pk).count() == 0


def test_a_teammate_may_share_a_workspace_they_can_see(user, team, django_user_model, dispatched):
    bob = django_user_model.objects.create_user("bob", password="bob-password-1")
    Membership.objects.create(user=bob, team=team, role=Role.MEMBER)
    bob_api = Client(headers={"Authorization": f"Bearer {api_token_create(user=bob, name='t')[1]}"})
    first = conversation_create(owner=user, team=team, prompt="hi", model="scripted")
    named = conversation_create(
        owner=user, team=team, prompt="hi", model="scripted", workspace="shared"
    )

    by_id = bob_api.post(
        "/api/conversations",
        data=json.dumps({"prompt": "go on", "team": team.pk, "workspace": str(first.pk)}),
        content_type="application/json",
    )
    by_name = bob_api.post(
        "/api/conversations",
        data=json.dumps({"prompt": "go on", "team": team.pk, "workspace": "shared"}),
        content_type="application/json",
    )
    assert by_id.status_code == 201 and by_name.status_code == 201
    assert Conversation.objects.get(pk=by_id.json()["id"]).workspace_path == first.workspace_path
    assert Conversation.objects.get(pk=by_name.json()["id"]).workspace_path == named.workspace_path


def test_a_folder_of_a_conversation_one_cannot_see_is_refused(api, team, other_user):
    """Rows from before the per-team layout keep their stored paths; one of another team that
    happens to lie in this team's area still may not be shared by this team."""
    foreign = _area(team) / "legacy"
    foreign.mkdir(parents=True)
    make_conversation(
        owner=other_user, team=team_default_for(other_user), workspace_path=str(foreign)
    )
    status, error = _create(api, "legacy")
    assert status == 400
    assert "cannot see" in error["detail"]
    assert Conversation.objects.filter(owner__username="alice").count() == 0


def test_a_file_where_a_folder_is_asked_for_is_a_400(api, team):
    _area(team).mkdir(parents=True)
    (_area(team) / "notes").write_text("a file")
    status, error = _create(api, "notes")
    assert status == 400 and "not a directory" in error["detail"]


def test_the_operator_may_still_name_any_directory(tmp_path, dispatched):
    """The local command line (run_conversation) passes unrestricted_workspace=True."""
    anywhere = tmp_path / "operator-chosen"
    conversation = conversation_create(
        owner=None, prompt="hi", model="scripted", workspace=str(anywhere),
        unrestricted_workspace=True,
    )  # fmt: skip
    assert conversation.workspace_path == str(anywhere.resolve())
    assert anywhere.is_dir()


def test_without_the_operator_flag_an_absolute_path_is_refused_even_for_trusted_callers(
    tmp_path, dispatched
):
    from common.errors import InvalidInput

    with pytest.raises(InvalidInput):
        conversation_create(
            owner=None, prompt="hi", model="scripted", workspace=str(tmp_path / "elsewhere")
        )
    assert not (tmp_path / "elsewhere").exists()


def test_the_detail_page_shows_the_workspace_name_not_the_server_path(alice_client, user):
    conversation = conversation_create(
        owner=user, prompt="hi", model="scripted", workspace="project-a"
    )
    page = alice_client.get(reverse("conversation-detail", args=[conversation.pk])).content
    assert b"<code>project-a</code>" in page
    assert os.fsencode(str(_root())) not in page
