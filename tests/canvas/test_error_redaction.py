"""Error texts leave through the API and the pages redacted: every secret value this process
handled, and the secrets of the asking person's teams, even ones this process never read."""

from __future__ import annotations

import pytest
from django.test import Client

from common import secret_values
from conversations import redaction
from teams.secrets import secret_create
from tests.api import client_for, send

pytestmark = pytest.mark.django_db

VALUE = "sk-door-7731-never-shown"


@pytest.fixture
def fresh_process(user, team, monkeypatch):
    """A team secret this web process has never decrypted nor received (another process
    stored it): only the team's own secrets can redact it."""
    secret_create(by=user, team=team, name="DOOR_KEY", value=VALUE)
    monkeypatch.setattr(secret_values, "_values", {})
    monkeypatch.setattr(secret_values, "_generation", secret_values._generation + 1)
    redaction._cache.clear()


def test_an_api_error_that_echoes_a_secret_is_redacted(user, fresh_process) -> None:
    response = send(client_for(user), "post", "/api/conversations", {"prompt": "x", "model": VALUE})
    assert response.status_code == 400
    body = response.json()
    assert VALUE not in response.content.decode()
    assert body["error"] == "invalid_input" and "<secret:DOOR_KEY>" in body["detail"]


def test_a_value_this_process_handled_is_redacted_for_anyone(user, other_user) -> None:
    secret_create(by=user, team=user.memberships.get().team, name="HANDLED", value=VALUE)
    response = send(
        client_for(other_user), "post", "/api/conversations", {"prompt": "x", "model": VALUE}
    )
    assert response.status_code == 400 and VALUE not in response.content.decode()


def test_a_page_error_that_echoes_a_secret_is_redacted(user, fresh_process) -> None:
    browser = Client()
    browser.force_login(user)
    page = browser.post("/conversations/new", {"prompt": "x", "model": VALUE})
    assert page.status_code == 400
    text = page.content.decode()
    # The form keeps what the person typed in its field; the error names the secret only.
    assert f"named &#x27;{VALUE}" not in text
    assert "named &#x27;&lt;secret:DOOR_KEY&gt;&#x27;" in text
