"""The team's Model profiles page: admins add, change, delete and test profiles; the test is
one tiny call on a worker, through LiteLLM to a fake OpenAI server, and no key reaches a page."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from django.template.loader import render_to_string
from django.test import Client
from django.urls import reverse

from orchestration import profile_checks
from orchestration.profile_checks import profile_check_get, profile_check_run, profile_check_start
from teams.models import AuditRecord, ModelProfile, Role
from teams.profiles import profile_create
from teams.secrets import secret_create, secret_delete
from teams.services import member_add
from tests.conftest import wait_for
from tests.fakes import FakeOpenAI

HX = {"HTTP_HX_REQUEST": "true"}
KEY = "sk-profile-test-key-0123456789"
CHECK_URL = re.compile(r'hx-get="(/teams/\d+/profiles/checks/[0-9a-f]+)"')


def _url(name: str, team) -> str:
    return reverse(name, args=[team.pk])


def _profile(team, **fields) -> dict:
    return {
        "name": "fast", "provider": "openai", "model": "gpt-4o-mini", "api_base": "",
        "api_key_secret": "OPENAI_KEY", "max_input_tokens": "", "temperature": "", **fields,
    }  # fmt: skip


@pytest.mark.django_db
def test_admin_round_trip(browser, team, user):
    secret_create(by=user, team=team, name="OPENAI_KEY", value=KEY)
    response = browser.post(_url("team-profile-create", team), _profile(team), **HX)
    assert response.status_code == 200
    page = response.content.decode()
    assert page.strip().startswith('<section id="profiles"')
    assert "<code>openai/gpt-4o-mini</code>" in page and "<code>OPENAI_KEY</code>" in page
    assert KEY not in page
    assert '<option value="openai" selected>' in page  # the edit form splits the id again

    edit = _profile(team, temperature="0.2", max_input_tokens="64000")
    response = browser.post(_url("team-profile-edit", team), edit, **HX)
    assert response.status_code == 200
    profile = ModelProfile.objects.get(team=team, name="fast")
    assert (profile.model, profile.temperature, profile.max_input_tokens) == (
        "openai/gpt-4o-mini", 0.2, 64000,
    )  # fmt: skip

    # The service's refusal, in its words; the form stays open with what was typed.
    response = browser.post(
        _url("team-profile-edit", team), _profile(team, api_key_secret="NOPE"), **HX
    )
    assert response.status_code == 400
    assert "the team has no secret named &#x27;NOPE&#x27;" in response.content.decode()
    response = browser.post(_url("team-profile-create", team), _profile(team), **HX)
    assert response.status_code == 409

    response = browser.post(_url("team-profile-delete", team), {"name": "fast"}, **HX)
    assert response.status_code == 200
    assert not ModelProfile.objects.filter(team=team).exists()
    kinds = list(
        AuditRecord.objects.filter(team=team, kind__startswith="profile.")
        .order_by("id")
        .values_list("kind", flat=True)
    )
    assert kinds == ["profile.created", "profile.updated", "profile.deleted"]


@pytest.mark.django_db
def test_a_member_sees_profiles_without_controls_and_every_write_is_refused(
    team, user, django_user_model
):
    profile_create(by=user, team=team, name="fast", model="openai/gpt-4o-mini")
    mia = django_user_model.objects.create_user("mia", password="mia-pw-12345")
    member_add(by=user, team=team, username="mia", role=Role.MEMBER)
    client = Client()
    client.force_login(mia)
    page = client.get(_url("team-profiles", team)).content.decode()
    assert "openai/gpt-4o-mini" in page
    assert 'id="profile-add"' not in page and "Test connection" not in page
    for name in (
        "team-profile-create",
        "team-profile-edit",
        "team-profile-delete",
        "team-profile-test",
    ):
        assert client.post(_url(name, team), _profile(team), **HX).status_code == 403, name
    check = reverse("team-profile-check", args=[team.pk, "0" * 32])
    assert client.get(check).status_code == 403
    assert ModelProfile.objects.get(team=team, name="fast").model == "openai/gpt-4o-mini"


@pytest.fixture
def local_model(team, user, loopback_allowed) -> Iterator[FakeOpenAI]:
    """The team's profile "local": a fake OpenAI server on 127.0.0.1, its key in a secret."""
    secret_create(by=user, team=team, name="OPENAI_KEY", value=KEY)
    with FakeOpenAI() as fake:
        profile_create(
            by=user, team=team, name="local", model="openai/fake-model",
            api_base=fake.base_url, api_key_secret="OPENAI_KEY",
        )  # fmt: skip
        yield fake


@pytest.mark.django_db
def test_the_check_calls_the_model_with_the_key_and_never_shows_it(team, local_model):
    local_model.push(say="ok")
    check = profile_check_run(team_id=team.pk, name="local", check_id="a1")
    assert (check.state, check.message) == ("ok", "ok")
    assert local_model.count == 1
    assert local_model.request_headers[0]["authorization"] == f"Bearer {KEY}"

    # A provider that echoes the key in its refusal: the page gets it redacted.
    local_model.push(status=401, error=f"Incorrect API key provided: {KEY}.")
    check = profile_check_run(team_id=team.pk, name="local", check_id="a2")
    assert check.state == "failed" and local_model.count == 2  # no retry
    assert check.message == "The provider refused the API key."  # a sentence, not a class
    assert "AuthenticationError (HTTP 401)" in check.detail
    assert "Incorrect API key provided" in check.detail and KEY not in check.detail
    assert profile_check_get(team=team, check_id="a2") == check

    # A server fault: a plain sentence; LiteLLM's class and status go to the details line.
    local_model.push(status=500, error="upstream exploded")
    check = profile_check_run(team_id=team.pk, name="local", check_id="a3")
    assert check.message == "The model's server failed to answer (an error on its side, HTTP 500)."
    assert check.detail.startswith("InternalServerError (HTTP 500)")
    html = render_to_string(
        "canvas/team_profiles.html#profile-check",
        {"team": team, "check": check, "check_id": "a3"},
    )
    assert "Not connected. The model&#x27;s server failed to answer" in html
    assert '<span class="check-detail">Details: <code>InternalServerError (HTTP 500)' in html


@pytest.mark.django_db
def test_a_missing_key_secret_is_said_in_words(team, user):
    secret_create(by=user, team=team, name="OPENAI_KEY", value=KEY)
    profile_create(
        by=user, team=team, name="fast", model="openai/gpt-4o-mini", api_key_secret="OPENAI_KEY"
    )
    secret_delete(by=user, team=team, name="OPENAI_KEY")
    check = profile_check_run(team_id=team.pk, name="fast", check_id="b1")
    assert check.state == "failed"
    assert "team secret 'OPENAI_KEY', which does not exist" in check.message


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_test_connection_goes_to_a_worker_and_the_page_polls_its_answer(
    browser, team, settings, start_worker, local_model
):
    # Web and worker share the Redis cache, as in production.
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": settings.REDIS_URL,
            "KEY_PREFIX": "canvas",
        }
    }
    start_worker(extra_env={"CANVAS_ALLOWED_PRIVATE_NETWORKS": "127.0.0.0/8"})
    local_model.push(say="ok from the fake model")
    response = browser.post(_url("team-profile-test", team), {"name": "local"}, **HX)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Testing local" in page
    check_url = CHECK_URL.search(page).group(1)

    def answered() -> str | None:
        page = browser.get(check_url, **HX).content.decode()
        return None if "hx-get" in page else page

    page = wait_for(answered, timeout=30, interval=0.3, message="no verdict")
    assert "Connected in" in page and "ok from the fake model" in page
    assert KEY not in page
    assert local_model.request_headers[0]["authorization"] == f"Bearer {KEY}"

    # A check id nobody made answers 404.
    assert browser.get(check_url.replace("checks/", "checks/0")).status_code == 404


@pytest.mark.django_db
def test_an_unanswered_check_ends_as_failed(team, user, dispatched, monkeypatch):
    profile_create(by=user, team=team, name="fast", model="openai/gpt-4o-mini")
    monkeypatch.setattr(profile_checks.current_app, "send_task", lambda *a, **k: None)
    check_id = profile_check_start(team=team, name="fast")
    assert profile_check_get(team=team, check_id=check_id).state == "pending"
    monkeypatch.setattr(profile_checks, "ANSWER_WITHIN_SECONDS", -1)
    check = profile_check_get(team=team, check_id=check_id)
    assert check.state == "failed" and "No worker answered" in check.message
