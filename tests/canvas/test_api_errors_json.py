"""Every error under /api/ is JSON {error, detail}, whatever produced it: a route's unhandled
exception, its authentication, a middleware, an unknown route or method. No HTML, no
traceback, no exception text."""

from __future__ import annotations

import logging

import pytest
from django.http import Http404
from django.test import Client

import canvas.api
import canvas.outbound
from canvas.api import conversations as conversation_routes

pytestmark = pytest.mark.django_db

LEAK = "boom-sk-internal-7731"


@pytest.fixture
def api(api_token) -> Client:
    # No re-raising: the test sees exactly what a client would.
    return Client(headers={"Authorization": f"Bearer {api_token}"}, raise_request_exception=False)


def error_of(response, status: int) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json"), response.content
    body = response.json()
    assert set(body) == {"error", "detail"}
    text = response.content.decode()
    assert LEAK not in text and "Traceback" not in text and "<html" not in text.lower()
    return body


def test_an_unhandled_exception_in_a_route_is_a_json_500_and_is_logged(api, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError(LEAK)

    monkeypatch.setattr(conversation_routes, "conversations_visible_to", broken)
    with caplog.at_level(logging.ERROR):
        body = error_of(api.get("/api/conversations"), 500)
    assert body["error"] == "internal_error"
    assert LEAK in caplog.text  # the operator sees what happened; the client does not


def test_an_http404_raised_in_a_route_is_json(api, monkeypatch):
    def missing(*args, **kwargs):
        raise Http404(LEAK)

    monkeypatch.setattr(conversation_routes, "conversations_visible_to", missing)
    assert error_of(api.get("/api/conversations"), 404)["error"] == "not_found"


def test_an_error_while_authenticating_is_a_json_500(api, monkeypatch):
    def cache_down(*args, **kwargs):
        raise ConnectionError(LEAK)

    monkeypatch.setattr(canvas.api, "api_token_authenticate", cache_down)
    assert error_of(api.get("/api/conversations"), 500)["error"] == "internal_error"


def test_an_exception_in_a_middleware_is_a_json_500_under_api_only(api_token, monkeypatch):
    def broken(self, request):
        raise RuntimeError(LEAK)

    monkeypatch.setattr(canvas.outbound.OutboundRequestMiddleware, "__call__", broken)
    client = Client(headers={"Authorization": f"Bearer {api_token}"}, raise_request_exception=False)
    assert error_of(client.get("/api/conversations"), 500)["error"] == "internal_error"
    page = client.get("/login/")
    assert page.status_code == 500 and page["Content-Type"].startswith("text/html")


def test_unknown_routes_and_methods_are_json(api):
    assert error_of(api.get("/api/no-such-thing"), 404)["error"] == "not_found"
    assert error_of(api.post("/api/teams/1/nothing-here"), 404)["error"] == "not_found"
    refused = api.delete("/api/conversations")
    body = error_of(refused, 405)
    assert body["error"] == "method_not_allowed"
    assert "GET" in refused["Allow"] and "GET" in body["detail"]


def test_a_session_post_without_csrf_is_a_json_403(user):
    browser = Client(enforce_csrf_checks=True, raise_request_exception=False)
    browser.force_login(user)
    response = browser.post("/api/conversations", {"prompt": "x"}, content_type="application/json")
    assert error_of(response, 403)["error"] == "forbidden"
