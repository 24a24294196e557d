"""Conversation titles: the default from the prompt in plain words, and renaming (the
service, the API's PATCH and the page's inline form), redacted and audited."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from orchestration import services
from orchestration.titles import default_title
from teams.models import AuditRecord, Role
from teams.secrets import secret_create
from teams.services import member_add, team_default_for
from tests.api import call, client_for
from tests.factories import make_conversation


@pytest.mark.parametrize(
    ("prompt", "title"),
    [
        ("Fix the login bug\nIt fails on Safari.", "Fix the login bug"),
        ("\n\n  ## Plan: **refactor** the `store`  \nmore", "Plan: refactor the store"),
        ("- first item\n- second", "first item"),
        ("```\ncode\n```\nExplain this", "code"),
        (json.dumps({"script": [{"say": "a"}, {"say": "b"}, {"say": "c"}]}), "Scripted run: 3 steps"),
        (json.dumps({"script": [{"say": "a"}]}), "Scripted run: 1 step"),
        ('{"not": "a script"}', '{"not": "a script"}'),
        ("word " * 40, ("word " * 16).strip() + "…"),
        ("   \n  ", ""),
    ],
)  # fmt: skip
def test_default_titles_are_plain_words(prompt, title):
    assert default_title(prompt) == title


def test_a_scripted_conversation_gets_a_scripted_title(user, dispatched):
    prompt = json.dumps({"script": [{"say": "hi"}, {"say": "bye"}]})
    conversation = services.conversation_create(owner=user, model="scripted", prompt=prompt)
    assert conversation.title == "Scripted run: 2 steps"


def test_rename_is_one_line_redacted_and_audited(user, dispatched):
    team = team_default_for(user)
    secret_create(by=user, team=team, name="MY_TOKEN", value="tok-very-secret-123")
    conversation = make_conversation(user)
    renamed = services.conversation_rename(
        conversation_id=conversation.pk, title="  deploy\n with tok-very-secret-123 ", by=user
    )
    assert renamed.title == "deploy with <secret:MY_TOKEN>"
    record = AuditRecord.objects.get(kind="conversation.renamed", target=str(conversation.pk))
    assert record.data["to"] == "deploy with <secret:MY_TOKEN>"
    assert "tok-very-secret-123" not in json.dumps(record.data)


def test_api_patch_renames_and_refuses_what_it_must(user, other_user, django_user_model):
    conversation = make_conversation(user)
    path = f"/api/conversations/{conversation.pk}"
    status, body = call(client_for(user), "patch", path, {"title": "Nightly report"})
    assert (status, body["title"]) == (200, "Nightly report")
    assert call(client_for(user), "patch", path, {"title": "  \n "})[0] == 400
    assert call(client_for(user), "patch", path, {"title": "x" * 201})[0] == 400
    assert call(client_for(other_user), "patch", path, {"title": "mine now"})[0] == 404
    viewer = django_user_model.objects.create_user("victor", password="victor-password-1")
    member_add(by=user, team=team_default_for(user), username="victor", role=Role.VIEWER)
    assert call(client_for(viewer), "patch", path, {"title": "viewer's"})[0] == 403
    conversation.refresh_from_db()
    assert conversation.title == "Nightly report"


def test_the_page_renames_inline(user):
    conversation = make_conversation(user)
    client = Client()
    client.force_login(user)
    url = reverse("conversation-title", args=[conversation.pk])
    form = client.get(url + "?edit=1", headers={"HX-Request": "true"}).content.decode()
    assert '<form id="conversation-title"' in form and 'name="title"' in form
    refused = client.post(url, {"title": " "}, headers={"HX-Request": "true"})
    assert refused.status_code == 400 and "at least one word" in refused.content.decode()
    done = client.post(url, {"title": "Renamed <b>here</b>"}, headers={"HX-Request": "true"})
    html = done.content.decode()
    assert done.status_code == 200 and "<h1>Renamed &lt;b&gt;here&lt;/b&gt;</h1>" in html
    detail = client.get(reverse("conversation-detail", args=[conversation.pk])).content.decode()
    assert "Renamed &lt;b&gt;here&lt;/b&gt;" in detail and "?edit=1" in detail
