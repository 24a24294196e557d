"""The new-conversation form's Agent picker: our own agent (with a model) or an external ACP
agent the team's policy allows; a refused choice is shown in the service's words and creates
nothing."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from acp_bridge.team_profiles import acp_agent_create
from conversations.models import Conversation
from teams.models import Policy
from tests.acp_bridge.turns import FIXTURE, fixture_profile

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
OPTION = re.compile(r'<option value="([^"]*)"[^>]*>([^<]*)</option>')


@pytest.fixture(autouse=True)
def _profiles(settings, dispatched):
    """Two site profiles (the fixture agent and another); turns are captured, not run."""
    settings.CANVAS_ACP_AGENTS = {FIXTURE: fixture_profile(), "other": {"command": "other-acp"}}


@pytest.fixture
def policy(team):
    """alice's team allows our agent, the fixture and its own profile `mine`, nothing else."""
    return Policy.objects.create(
        team=team, allowed_agent_kinds=["native", f"acp:{FIXTURE}", "acp:mine"]
    )


def _options(page: str) -> dict[str, str]:
    select = page.split('<select name="agent"', 1)[1].split("</select>", 1)[0]
    return dict(OPTION.findall(select))


def _new(browser, **fields):
    form = {"prompt": "edit notes.txt hello", "model": "demo", "workspace_kind": "local"}
    return browser.post(reverse("conversation-new"), {**form, **fields}, **HX)


def test_the_picker_lists_only_the_profiles_the_policy_allows(browser, user, team, policy):
    acp_agent_create(by=user, team=team, name="mine", command="mine-acp")
    acp_agent_create(by=user, team=team, name="theirs", command="theirs-acp")
    page = browser.get(reverse("conversation-list")).content.decode()
    assert _options(page) == {
        "": "Our agent (with the model below)",
        FIXTURE: f"{FIXTURE} (site profile)",
        "mine": "mine (team profile)",
    }
    assert '<option value="" selected>' in page  # our own agent unless one is picked
    assert '<optgroup label="External agents (ACP)">' in page
    assert '<label for="id_agent">Agent</label>' in page
    assert 'aria-describedby="agent-help"' in page and 'id="agent-help"' in page
    assert 'class="model-field"' in page  # the part app.css hides while an agent is picked


def test_without_a_restriction_every_profile_is_offered_with_its_source(browser):
    options = _options(browser.get(reverse("conversation-list")).content.decode())
    assert options[FIXTURE] == f"{FIXTURE} (site profile)"
    assert options["other"] == "other (site profile)"
    assert options["claude-code"] == "claude-code (preset)"


def test_a_policy_allowing_no_external_agent_offers_only_ours(browser, team):
    Policy.objects.create(team=team, allowed_agent_kinds=["native"])
    page = browser.get(reverse("conversation-list")).content.decode()
    assert _options(page) == {"": "Our agent (with the model below)"}
    assert "<optgroup" not in page.split('<select name="agent"', 1)[1].split("</select>", 1)[0]


def test_posting_an_agent_creates_its_conversation_and_ignores_the_model(
    browser, user, policy, dispatched
):
    response = _new(browser, agent=FIXTURE, model="")
    assert response.status_code == 200, response.content.decode()
    conversation = Conversation.objects.get(owner=user)
    assert response["HX-Redirect"] == reverse("conversation-detail", args=[conversation.pk])
    assert (conversation.agent, conversation.model) == (FIXTURE, "")
    assert [pk for pk, _slice in dispatched] == [str(conversation.pk)]
    # The list says which agent runs it, where our own conversations show their model.
    page = browser.get(reverse("conversation-list")).content.decode()
    assert f'<code>{FIXTURE}</code> <span class="muted">external agent</span>' in page


def test_a_team_profile_can_be_picked(browser, user, team, policy):
    acp_agent_create(by=user, team=team, name="mine", command="mine-acp")
    response = browser.post(
        reverse("conversation-new"), {"prompt": "hi", "model": "demo", "agent": "mine"}
    )
    conversation = Conversation.objects.get(owner=user)
    assert response.status_code == 302
    assert conversation.agent == "mine"


def test_our_agent_still_needs_a_model(browser, policy):
    response = _new(browser, agent="", model="")
    assert response.status_code == 400
    page = response.content.decode()
    assert page.strip().startswith('<form id="new-conversation"')
    assert "This field is required." in page
    assert not Conversation.objects.exists()


def test_our_agent_is_the_default(browser, user, policy):
    assert _new(browser).status_code == 200
    conversation = Conversation.objects.get(owner=user)
    assert (conversation.agent, conversation.model) == ("", "demo")


@pytest.mark.parametrize(
    ("agent", "says"),
    [
        ("other", "does not allow the external agent &#x27;other&#x27; by policy"),
        ("no-such-agent", "No ACP agent profile named &#x27;no-such-agent&#x27;"),
    ],
)
def test_a_profile_not_allowed_or_unknown_is_refused_in_the_form(browser, policy, agent, says):
    response = _new(browser, agent=agent)
    page = response.content.decode()
    assert response.status_code == 400
    assert page.strip().startswith('<form id="new-conversation"')
    assert says in page and 'class="form-errors" role="alert"' in page
    assert not Conversation.objects.exists()


def test_the_refusal_is_shown_on_the_full_page_without_htmx(browser, policy):
    response = browser.post(
        reverse("conversation-new"), {"prompt": "hi", "model": "demo", "agent": "other"}
    )
    assert response.status_code == 400
    assert b"<html" in response.content and b"does not allow the external agent" in response.content
    assert not Conversation.objects.exists()


def test_an_external_agent_can_run_in_a_docker_workspace(
    browser, user, policy, settings, monkeypatch, dispatched
):
    import orchestration.services

    monkeypatch.setattr(orchestration.services, "kind_unavailable", lambda kind: None)
    response = _new(
        browser, agent=FIXTURE, workspace_kind="docker", image=settings.CANVAS_DOCKER_IMAGE
    )
    assert response.status_code == 200, response.content.decode()
    conversation = Conversation.objects.get(owner=user)
    assert conversation.agent == FIXTURE and conversation.workspace_spec["kind"] == "docker"
    assert [pk for pk, _slice in dispatched] == [str(conversation.pk)]
