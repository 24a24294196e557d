"""The websocket Origin check compares the full origin: scheme, host and port."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from canvas.asgi import application
from canvas.ws_origin import origin_allowed
from tests.canvas.test_ui_consumer import make_conversation, session_headers, url_for


def scope(origin: str | None, host: str | None = "testserver", **extra) -> dict:
    headers = []
    if host is not None:
        headers.append((b"host", host.encode()))
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    return {"type": "websocket", "headers": headers, **extra}


@pytest.mark.parametrize(
    "origin, host, extra",
    [
        ("http://testserver", "testserver", {}),
        ("http://TestServer", "testserver", {}),
        ("http://testserver:80", "testserver", {}),
        ("http://127.0.0.1:8000", "127.0.0.1:8000", {}),
        ("https://127.0.0.1:8000", "127.0.0.1:8000", {"scheme": "wss"}),
        ("https://localhost", "localhost", {"scheme": "wss"}),
    ],
)
def test_the_pages_own_origin_is_allowed(origin, host, extra):
    assert origin_allowed(scope(origin, host, **extra))


@pytest.mark.parametrize(
    "origin, host, extra",
    [
        ("http://localhost:6666", "localhost:8000", {}),  # another port
        ("https://127.0.0.1", "127.0.0.1", {}),  # another scheme than the connection's
        ("http://127.0.0.1:8000", "127.0.0.1:8000", {"scheme": "wss"}),  # http page, wss socket
        ("http://evil.example", "testserver", {}),
        ("http://testserver.evil.example", "testserver", {}),
        ("http://evil.example", "evil.example", {}),  # a Host not in ALLOWED_HOSTS
        ("http://testserver", None, {}),  # no Host: nothing to compare with
        ("null", "testserver", {}),  # sandboxed iframes, file:// pages
        ("ws://testserver", "testserver", {}),
        ("http://testserver:99999", "testserver", {}),
        ("", "testserver", {}),
    ],
)
def test_any_other_origin_is_refused(origin, host, extra):
    assert not origin_allowed(scope(origin, host, **extra))


def test_no_origin_needs_a_bearer_token():
    assert not origin_allowed(scope(None))
    assert origin_allowed(scope(None, auth_via_token=True))


def test_csrf_trusted_origins_are_allowed_exactly(settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://canvas.example.com", "https://*.corp.example"]
    assert origin_allowed(scope("https://canvas.example.com", "internal:8000"))
    assert origin_allowed(scope("https://canvas.example.com:443", "internal:8000"))
    assert origin_allowed(scope("https://team.corp.example", "internal:8000"))
    assert not origin_allowed(scope("http://canvas.example.com", "internal:8000"))
    assert not origin_allowed(scope("https://canvas.example.com:8443", "internal:8000"))
    assert not origin_allowed(scope("https://corp.example.evil", "internal:8000"))


def test_the_tls_proxy_header_sets_the_scheme(settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    proxied = [(b"x-forwarded-proto", b"https")]
    allowed = scope("https://testserver")
    allowed["headers"] += proxied
    assert origin_allowed(allowed)
    downgraded = scope("http://testserver")
    downgraded["headers"] += proxied
    assert not origin_allowed(downgraded)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("origin", [b"http://localhost:6666", b"https://testserver"])
async def test_the_page_socket_refuses_another_port_or_scheme(user, origin):
    conversation = await database_sync_to_async(make_conversation)(user, 1)
    headers = await database_sync_to_async(session_headers)(user, (b"origin", origin))
    communicator = WebsocketCommunicator(application, url_for(conversation), headers=headers)
    assert await communicator.connect() == (False, 4403)
