"""The new-conversation form: a model picker listing the team's profiles and the site's (or
another LiteLLM id), the confirmation mode and a budget, both within the team's policy."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from conversations.models import Conversation
from teams.models import Policy
from teams.profiles import profile_create

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
OPTION = re.compile(r'<option value="([^"]*)"[^>]*>([^<]*)</option>')


def _select(page: str, name: str) -> str:
    return page.split(f'<select name="{name}"', 1)[1].split("</select>", 1)[0]


def _new(browser, **fields):
    form = {"prompt": "hello", "model": "scripted", "workspace_kind": "local"}
    return browser.post(reverse("conversation-new"), {**form, **fields}, **HX)


def _newest() -> Conversation:
    return Conversation.objects.order_by("-created_at").first()


def test_the_model_picker_lists_the_teams_profiles_then_the_sites(browser, user, team):
    profile_create(by=user, team=team, name="fast", model="openai/gpt-4o-mini")
    page = browser.get(reverse("conversation-list")).content.decode()
    select = _select(page, "model")
    groups = re.findall(r'<optgroup label="([^"]+)">', select)
    assert groups == ["Team profiles", "Site models"]
    values = [value for value, _ in OPTION.findall(select)]
    assert values == ["fast", "demo", "scripted", "__other__"]
    assert '<option value="demo" selected>' in select  # CANVAS_DEFAULT_MODEL
    assert 'data-show-when="model=__other__"' in page
    assert 'data-show-when="workspace_kind=docker"' in page  # the image, for Docker only
    assert "canvas/new-conversation.js" in page


def test_another_model_id_is_typed_and_required_when_picked(browser):
    response = _new(browser, model="__other__", model_other="")
    assert response.status_code == 400
    assert "Type the model&#x27;s LiteLLM id" in response.content.decode()
    assert not Conversation.objects.exists()
    response = _new(browser, model="__other__", model_other="openai/gpt-4o-mini")
    assert response.status_code == 200, response.content.decode()
    assert _newest().model == "openai/gpt-4o-mini"


def test_confirmation_mode_and_budget_reach_the_run(browser):
    response = _new(browser, confirmation_mode="always", max_cost_usd="0.25")
    assert response.status_code == 200, response.content.decode()
    config = _newest().agent_config
    assert (config["confirmation_mode"], config["max_cost_usd"]) == ("always", 0.25)
    _new(browser, confirmation_mode="", max_cost_usd="")
    config = _newest().agent_config
    assert (config["confirmation_mode"], config["max_cost_usd"]) == ("risky", None)


def test_the_policy_bounds_what_is_offered_and_what_is_taken(browser, team):
    Policy.objects.create(team=team, confirmation_mode="risky", max_cost_per_run_usd="1.00")
    page = browser.get(reverse("conversation-list")).content.decode()
    modes = OPTION.findall(_select(page, "confirmation_mode"))
    assert modes == [("", "Team default: confirm risky actions"), ("always", "Always confirm")]
    assert "the team allows at most $1.00" in page
    response = _new(browser, max_cost_usd="5")
    assert response.status_code == 400  # the service's words, in the form
    assert "max_cost_usd" in response.content.decode() and not Conversation.objects.exists()
    response = _new(browser, confirmation_mode="never")
    assert response.status_code == 400 and not Conversation.objects.exists()
