"""The 404, 403 and 500 pages: the site's layout with the mobile viewport, words for people,
a way back; the 500 page renders without the request and without the database."""

from __future__ import annotations

import pytest
from django.test import Client, RequestFactory
from django.urls import reverse
from django.views import defaults

from teams.models import Role
from teams.services import member_add, team_default_for
from tests.factories import make_conversation

VIEWPORT = '<meta name="viewport" content="width=device-width, initial-scale=1">'


def _styled(html: str) -> None:
    assert VIEWPORT in html
    assert "canvas/app.css" in html and 'class="page error-page"' in html
    assert 'href="/"' in html  # the way back
    assert "{#" not in html and "#}" not in html  # template comments stay comments
    assert "Traceback" not in html


@pytest.mark.django_db
def test_an_unknown_page_is_a_styled_404_with_the_navigation(client, user):
    client.force_login(user)
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    html = response.content.decode()
    _styled(html)
    assert "Nothing here" in html and 'aria-label="Main"' in html


@pytest.mark.django_db
def test_a_refusal_by_role_is_a_styled_403_in_the_services_words(user, django_user_model):
    conversation = make_conversation(owner=user)
    vera = django_user_model.objects.create_user("vera", password="vera-password-1")
    member_add(by=user, team=team_default_for(user), username="vera", role=Role.VIEWER)
    client = Client()
    client.force_login(vera)
    url = reverse("conversation-message", args=[conversation.pk])
    response = client.post(url, {"text": "hello"})
    assert response.status_code == 403
    html = response.content.decode()
    _styled(html)
    assert "Not allowed" in html and "viewer" in html.lower()


def test_the_500_page_needs_neither_the_request_nor_the_database():
    """No django_db mark: any query here would fail the test."""
    response = defaults.server_error(RequestFactory().get("/anything/"))
    assert response.status_code == 500
    html = response.content.decode()
    _styled(html)
    assert "Something went wrong" in html and 'aria-label="Main"' not in html


@pytest.mark.django_db
def test_a_csrf_refusal_is_the_styled_403_without_django_inline_style(user):
    """Django's own CSRF page carries a <style> element, which the CSP refuses."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post(reverse("conversation-new"), {"prompt": "hi", "model": "demo"})
    assert response.status_code == 403
    html = response.content.decode()
    _styled(html)
    assert "This form has expired" in html and "<style" not in html
