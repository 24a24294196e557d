"""Titles written by the conversation's own model (Team.model_titles): asked for on a worker
once the prompt hooks let the first message through, never over a title a person chose,
redacted like every title; the team's setting through the API and the Model profiles page."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from conversations.models import Conversation
from orchestration import services, title_model
from orchestration.step import runner
from orchestration.title_model import title_write
from orchestration.titles import model_title
from teams.hooks import hook_create
from teams.models import AuditRecord, Role, Team
from teams.secrets import secret_create
from teams.services import member_add
from tests.api import client_for, send
from tests.conftest import wait_for
from tests.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)

TITLE = "Fix the flaky login test"
FINISH = {"tool": "finish", "args": {"message": "done"}}


def titled_script(title: str, *turns) -> str:
    return json.dumps({"script": list(turns) or [FINISH], "title": title})


def titles_on(team: Team) -> None:
    Team.objects.filter(pk=team.pk).update(model_titles=True)


@pytest.fixture
def requested(monkeypatch) -> list[str]:
    """Title requests the runner makes, captured (the worker's task is tested on its own)."""
    sent: list[str] = []
    monkeypatch.setattr(runner, "title_request", lambda cid: sent.append(str(cid)))
    return sent


def create(user, prompt: str, **options) -> Conversation:
    return services.conversation_create(owner=user, prompt=prompt, model="scripted", **options)


@pytest.mark.parametrize(
    ("answer", "title"),
    [
        ('"Fix the flaky login test."', TITLE),
        ("Title: Fix the flaky login test", TITLE),
        ("\n\n“Fix the flaky login test”\nBecause the user asked…", TITLE),
        ("**Fix** the `flaky` login test", TITLE),
        ("word " * 40, ("word " * 16).strip() + "…"),
        ("", ""),
        (None, ""),
    ],
)
def test_an_answer_becomes_one_clean_line(answer, title) -> None:
    assert model_title(answer) == title


def test_the_model_titles_a_checked_prompt_and_the_run_asks_for_it(
    user, team, dispatched, requested
) -> None:
    titles_on(team)
    conversation = create(user, titled_script(TITLE))
    assert conversation.title == "Scripted run: 1 step"
    assert title_write(str(conversation.pk)) is None  # not checked yet: no model reads it
    drive(dispatched)
    assert requested == [str(conversation.pk)]
    assert title_write(str(conversation.pk)) == TITLE
    assert Conversation.objects.get(pk=conversation.pk).title == TITLE
    assert title_write(str(conversation.pk)) is None  # once only: it is no longer the default


def test_a_title_a_person_chose_is_kept(user, team, dispatched, requested) -> None:
    titles_on(team)
    given = create(user, titled_script(TITLE), title="My own title")
    renamed = create(user, titled_script(TITLE))
    drive(dispatched)
    services.conversation_rename(conversation_id=renamed.pk, title="Renamed by Ana", by=user)
    for conversation, kept in ((given, "My own title"), (renamed, "Renamed by Ana")):
        assert title_write(str(conversation.pk)) is None
        assert Conversation.objects.get(pk=conversation.pk).title == kept


def test_teams_without_the_setting_keep_the_first_line(user, team, dispatched) -> None:
    conversation = create(user, titled_script(TITLE))
    drive(dispatched)
    assert title_write(str(conversation.pk)) is None
    assert Conversation.objects.get(pk=conversation.pk).title == "Scripted run: 1 step"


def test_a_blocked_prompt_never_reaches_the_model_for_a_title(
    user, team, dispatched, requested
) -> None:
    titles_on(team)
    hook_create(by=user, team=team, name="deny", event="UserPromptSubmit", command="exit 2")
    conversation = create(user, titled_script(TITLE))
    drive(dispatched)
    assert Conversation.objects.get(pk=conversation.pk).status == "error"
    assert requested == []
    assert title_write(str(conversation.pk)) is None


def test_a_secret_in_the_models_title_is_redacted(user, team, dispatched) -> None:
    value = "hunter2-title-3141"
    secret_create(by=user, team=team, name="DEPLOY_KEY", value=value)
    titles_on(team)
    conversation = create(user, titled_script(f"Deploy with {value} tonight"))
    drive(dispatched)
    title = title_write(str(conversation.pk))
    assert title is not None and value not in title and "DEPLOY_KEY" in title
    assert value not in Conversation.objects.get(pk=conversation.pk).title


@pytest.mark.worker
def test_a_worker_writes_the_title_after_the_first_check(user, team, start_worker) -> None:
    titles_on(team)
    start_worker()
    conversation = create(user, titled_script(TITLE, {"tool": "think", "args": {"thought": "x"}}))

    def titled() -> str | None:
        title = Conversation.objects.get(pk=conversation.pk).title
        return title if title == TITLE else None

    wait_for(titled, timeout=60, interval=0.2, message="no model title")


def test_the_setting_through_the_api_is_for_admins_and_audited(
    user, team, django_user_model
) -> None:
    api = client_for(user)
    assert send(api, "get", f"/api/teams/{team.pk}").json()["model_titles"] is False
    response = send(api, "patch", f"/api/teams/{team.pk}", {"model_titles": True})
    assert response.status_code == 200, response.content
    assert response.json() == {
        "id": team.pk, "name": team.name, "role": "owner", "model_titles": True
    }  # fmt: skip
    record = AuditRecord.objects.get(team=team, kind="team.settings_changed")
    assert record.data == {"model_titles": True}
    assert send(api, "patch", f"/api/teams/{team.pk}", {"model_titles": "maybe"}).status_code in (
        400,
        422,
    )

    bob = django_user_model.objects.create_user("bob", password="bob-password-1")
    member_add(by=user, team=team, username="bob", role=Role.MEMBER)
    refused = send(client_for(bob), "patch", f"/api/teams/{team.pk}", {"model_titles": False})
    assert refused.status_code == 403
    assert Team.objects.get(pk=team.pk).model_titles is True


def test_the_profiles_page_sets_it(browser, team, user, django_user_model) -> None:
    url = reverse("team-profile-titles", args=[team.pk])
    page = browser.get(reverse("team-profiles", args=[team.pk])).content.decode()
    assert "Ask each conversation" in page
    response = browser.post(url, {"model_titles": "on"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "Saved." in response.content.decode()
    assert Team.objects.get(pk=team.pk).model_titles is True
    browser.post(url, {}, HTTP_HX_REQUEST="true")
    assert Team.objects.get(pk=team.pk).model_titles is False


def test_title_request_sends_only_for_teams_that_want_it(
    user, team, dispatched, monkeypatch
) -> None:
    conversation = create(user, titled_script(TITLE))  # its slice is captured, not sent
    sent: list = []
    monkeypatch.setattr(
        title_model.current_app, "send_task", lambda name, **kw: sent.append((name, kw["args"]))
    )
    title_model.title_request(conversation.pk)
    assert sent == []
    titles_on(team)
    title_model.title_request(conversation.pk)
    assert sent == [(title_model.TITLE_TASK, [str(conversation.pk)])]
