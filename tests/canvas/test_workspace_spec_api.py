"""POST /api/conversations with a workspace object, the policy's refusals (400 naming the rule),
the form, Close (409 on a later message, another team's close is a 404) and the orphan
sweep's idea of which conversations are open."""

from __future__ import annotations

import json
import uuid

import pytest
from django.urls import reverse

from conversations.models import Conversation
from orchestration.workspace import conversations_open
from teams.models import AuditRecord, Policy
from tests.workspaces.test_sources import make_repo

pytestmark = pytest.mark.django_db(transaction=True)

HX = {"HTTP_HX_REQUEST": "true"}


def post(api, url: str, body: dict) -> tuple[int, dict]:
    response = api.post(url, json.dumps(body), content_type="application/json")
    return response.status_code, response.json()


def create(api, workspace) -> tuple[int, dict]:
    return post(api, "/api/conversations",
                {"prompt": "hi", "model": "scripted", "workspace": workspace})  # fmt: skip


def test_a_name_still_names_the_folder_and_the_output_says_local(api, dispatched):
    status, body = create(api, "shared-folder")
    assert status == 201, body
    assert body["workspace"] == "shared-folder"
    assert body["workspace_spec"] == {"kind": "local", "source": None, "image": None}
    assert body["closed_at"] is None


def test_an_object_with_a_git_source_is_stored(api, dispatched, settings, tmp_path):
    make_repo(tmp_path / "repos" / "p")
    settings.CANVAS_GIT_LOCAL_ROOTS = [str(tmp_path / "repos")]
    source = {"repo": str(tmp_path / "repos" / "p"), "ref": "v1"}
    status, body = create(api, {"kind": "local", "source": source})
    assert status == 201, body
    assert body["workspace_spec"] == {"kind": "local", "source": source, "image": None}
    stored = Conversation.objects.get(pk=body["id"]).workspace_spec
    assert stored["source"] == source


@pytest.mark.parametrize(
    ("workspace", "says"),
    [
        ({"kind": "local", "image": "x:1"}, "an image is only for docker workspaces"),
        ({"source": {"repo": "/etc"}}, "CANVAS_GIT_LOCAL_ROOTS"),
        ({"source": {"repo": "https://10.0.0.1/x.git"}}, "refused"),
        ({"source": {"repo": "r", "ref": "--upload-pack=x"}}, "ref"),
    ],
)
def test_a_workspace_the_site_will_not_make_is_a_400(api, dispatched, workspace, says):
    status, body = create(api, workspace)
    assert status == 400, body
    assert says in body["detail"]
    assert not Conversation.objects.exists()


def test_a_kind_the_policy_does_not_allow_is_a_400_naming_the_rule(api, dispatched, team):
    Policy.objects.create(team=team, allowed_workspace_kinds=["local"])
    status, body = create(api, {"kind": "docker"})
    assert status == 400, body
    assert "does not allow docker workspaces" in body["detail"]
    assert "allowed_workspace_kinds: local" in body["detail"]


def test_an_image_the_policy_does_not_allow_is_a_400_naming_the_rule(
    api, dispatched, team, settings
):
    settings.CANVAS_DOCKER_IMAGES = ["img:a", "img:b"]
    Policy.objects.create(team=team, allowed_images=["img:a"])
    status, body = create(api, {"kind": "docker", "image": "img:b"})
    assert status == 400, body
    assert "image 'img:b' is not allowed" in body["detail"] and "allowed_images" in body["detail"]
    status, body = create(api, {"kind": "docker", "image": "not-listed:1"})
    assert status == 400 and "img:a" in body["detail"]


def test_docker_without_an_engine_is_a_400_saying_so(api, dispatched, settings, monkeypatch):
    import workspaces.docker

    settings.CANVAS_DOCKER_IMAGES = [settings.CANVAS_DOCKER_IMAGE]
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.setattr(workspaces.docker, "_available", None)  # no answer cached from before
    status, body = create(api, {"kind": "docker"})
    assert status == 400, body
    assert "docker workspaces cannot be used here: no Docker engine answers" in body["detail"]
    monkeypatch.setattr(workspaces.docker, "_available", None)


def test_close_stops_the_run_and_refuses_later_messages(api, dispatched, team):
    _, body = create(api, None)
    url = f"/api/conversations/{body['id']}"
    status, closed = post(api, f"{url}/close", {})
    assert status == 200, closed
    assert closed == {"status": "paused", "closed": True}
    conversation = Conversation.objects.get(pk=body["id"])
    assert conversation.closed_at is not None and conversation.interrupt_requested_at is not None
    assert api.get(url).json()["closed_at"] is not None
    status, refused = post(api, f"{url}/messages", {"text": "more"})
    assert status == 409 and "closed" in refused["detail"]
    status, refused = post(api, f"{url}/run", {})
    assert status == 409 and "closed" in refused["detail"]
    status, again = post(api, f"{url}/close", {})
    assert status == 409 and "already closed" in again["detail"]
    assert AuditRecord.objects.filter(kind="conversation.closed").count() == 1
    # Its folder stays (Changes, Files, archive) until it is deleted.
    assert api.get(f"{url}/changes").status_code == 200


def test_another_teams_close_is_a_404(api, dispatched, other_user):
    from tests.api import client_for

    _, body = create(api, None)
    status, _ = post(client_for(other_user), f"/api/conversations/{body['id']}/close", {})
    assert status == 404
    assert Conversation.objects.get(pk=body["id"]).closed_at is None


def test_the_close_button(browser, user, dispatched):
    from orchestration import services

    conversation = services.conversation_create(owner=user, prompt="hi", model="scripted")
    page = browser.get(reverse("conversation-detail", args=[conversation.pk])).content.decode()
    assert reverse("conversation-close", args=[conversation.pk]) in page
    response = browser.post(reverse("conversation-close", args=[conversation.pk]), **HX)
    assert response.status_code == 200
    assert (
        "Closed" in response.content.decode()
        and "close-conversation" not in response.content.decode()
    )
    again = browser.post(reverse("conversation-close", args=[conversation.pk]), **HX)
    assert again.status_code == 409 and "already closed" in again.content.decode()


def test_the_new_conversation_form_offers_the_workspace(browser, dispatched, settings, tmp_path):
    settings.CANVAS_DOCKER_IMAGES = ["img:a", "img:b"]
    page = browser.get(reverse("conversation-list")).content.decode()
    for name in ("workspace_kind", "image", "git_repo", "git_ref"):
        assert f'name="{name}"' in page
    assert '<option value="img:b">img:b</option>' in page
    make_repo(tmp_path / "repos" / "p")
    settings.CANVAS_GIT_LOCAL_ROOTS = [str(tmp_path / "repos")]
    form = {"prompt": "hi", "model": "scripted", "workspace": "", "workspace_kind": "local",
            "image": "img:a", "git_repo": str(tmp_path / "repos" / "p"), "git_ref": "v1"}  # fmt: skip
    response = browser.post(reverse("conversation-new"), form, **HX)
    assert response.status_code == 200, response.content.decode()
    spec = Conversation.objects.get().workspace_spec
    assert spec == {"kind": "local", "image": None,
                    "source": {"repo": str(tmp_path / "repos" / "p"), "ref": "v1"}}  # fmt: skip
    refused = browser.post(reverse("conversation-new"), {**form, "git_ref": "--x"}, **HX)
    assert refused.status_code == 400 and "must not start with" in refused.content.decode()


def test_the_form_marks_docker_unavailable_with_the_reason(browser, monkeypatch):
    import workspaces.docker

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.setattr(workspaces.docker, "_available", None)
    page = browser.get(reverse("conversation-list")).content.decode()
    assert 'value="docker" disabled' in page
    assert "Docker workspaces are unavailable: no Docker engine answers" in page
    monkeypatch.setattr(workspaces.docker, "_available", None)


def test_the_sweep_keeps_only_open_conversations(dispatched):
    from orchestration import run_control, services

    kept = services.conversation_create(owner=None, prompt="hi", model="scripted")
    closed = services.conversation_create(owner=None, prompt="hi", model="scripted")
    run_control.conversation_close(conversation_id=closed.pk, by=None)
    asked = {str(kept.pk), str(closed.pk), str(uuid.uuid4()), "not-a-uuid", ""}
    assert conversations_open(asked) == {str(kept.pk)}
