"""Team notifications end to end against a real HTTP server on 127.0.0.1: sent after commit,
signed, retried on server errors, never raising into the runner, never logging the secret.
The Celery task runs eagerly (its retries too), so no worker is needed."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import transaction

from canvas.celery import app
from orchestration.control import notify
from orchestration.control.notify import notify_status_on_commit
from orchestration.control.notify_tasks import MAX_ATTEMPTS, notify_webhook
from teams.notifications import notification_set
from tests.http_server import QuietHandler, serving

pytestmark = pytest.mark.django_db

CONVERSATION = str(uuid.uuid4())


@dataclass
class Receiver:
    """Records every request; answers with the next planned status (200 once they run out)."""

    plan: list[int] = field(default_factory=list)
    delay: float = 0.0
    requests: list[dict] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/services/T1/B2/path-token"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver()

    class Handler(QuietHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            state.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            status = state.plan.pop(0) if state.plan else 200
            if state.delay and len(state.requests) == 1:
                time.sleep(state.delay)
            try:
                self.send_response(status)
                if status in (301, 302, 307):
                    self.send_header("Location", "/somewhere-else")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
            except OSError:  # the client gave up waiting
                pass

    with serving(Handler) as port:
        state.port = port
        yield state


@pytest.fixture(autouse=True)
def _receiver_reachable(loopback_allowed) -> None:
    """The receiver listens on 127.0.0.1, which the SSRF guard refuses unless allowed."""


@pytest.fixture(autouse=True)
def eager() -> Iterator[None]:
    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


@pytest.fixture
def secret(user, team, receiver) -> str:
    return notification_set(by=user, team=team, url=receiver.url).secret


def fire(team, django_capture_on_commit_callbacks, **overrides) -> None:
    kwargs = {
        "conversation_id": CONVERSATION, "team_id": team.pk,
        "status": "waiting_for_confirmation", "reason": "terminal: rm -rf build",
        "title": "Clean the build", **overrides,
    }  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        notify_status_on_commit(**kwargs)


def test_a_notification_is_signed_slack_compatible_json(
    team, secret, receiver, settings, django_capture_on_commit_callbacks
) -> None:
    settings.CANVAS_BASE_URL = "https://canvas.example.com/"
    fire(team, django_capture_on_commit_callbacks)
    assert len(receiver.requests) == 1
    request = receiver.requests[0]
    assert request["path"] == "/services/T1/B2/path-token"
    headers = request["headers"]
    timestamp = headers["X-Canvas-Timestamp"]
    assert abs(int(timestamp) - time.time()) < 60
    expected = hmac.new(
        secret.encode(), f"{timestamp}.{request['body']}".encode(), hashlib.sha256
    ).hexdigest()
    assert hmac.compare_digest(headers["X-Canvas-Signature"], f"v1={expected}")
    assert headers["Content-Type"].startswith("application/json")

    body = json.loads(request["body"])
    link = f"https://canvas.example.com/conversations/{CONVERSATION}/"
    assert body["conversation"] == {
        "id": CONVERSATION, "title": "Clean the build", "status": "waiting_for_confirmation",
        "reason": "terminal: rm -rf build", "url": link,
    }  # fmt: skip
    assert "needs approval" in body["text"] and f"<{link}|Open>" in body["text"]
    assert body["blocks"][0]["text"]["text"] == body["text"]


def test_titles_cannot_ping_a_slack_channel(
    team, secret, receiver, django_capture_on_commit_callbacks
) -> None:
    fire(team, django_capture_on_commit_callbacks, title="<!channel> deploy & go", status="error")
    body = json.loads(receiver.requests[0]["body"])
    assert "<!channel>" not in body["text"] and "&lt;!channel&gt; deploy &amp; go" in body["text"]
    assert body["conversation"]["title"] == "<!channel> deploy & go"  # data stays raw


def test_nothing_is_sent_before_commit_or_after_a_rollback(
    team, secret, receiver, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks() as callbacks, transaction.atomic():
        notify_status_on_commit(
            conversation_id=CONVERSATION, team_id=team.pk, status="finished", reason="",
            title="t",
        )  # fmt: skip
    assert receiver.requests == [] and len(callbacks) == 1
    callbacks[0]()
    assert len(receiver.requests) == 1

    class Boom(Exception):
        pass

    with pytest.raises(Boom), transaction.atomic():
        notify_status_on_commit(
            conversation_id=CONVERSATION, team_id=team.pk, status="finished", reason="",
            title="t",
        )  # fmt: skip
        raise Boom
    assert len(receiver.requests) == 1


def test_no_webhook_sends_nothing(
    team, receiver, monkeypatch, django_capture_on_commit_callbacks, django_assert_num_queries
) -> None:
    monkeypatch.setattr(
        notify_webhook, "apply_async", lambda **_: pytest.fail("no task for a team without")
    )
    with django_assert_num_queries(1), django_capture_on_commit_callbacks() as callbacks:
        notify_status_on_commit(
            conversation_id=CONVERSATION, team_id=team.pk, status="finished", reason="",
            title="t",
        )  # fmt: skip
    assert callbacks == [] and receiver.requests == []


def test_server_errors_are_retried_with_one_delivery_id(
    team, secret, receiver, django_capture_on_commit_callbacks
) -> None:
    receiver.plan = [500, 503]
    fire(team, django_capture_on_commit_callbacks)
    assert len(receiver.requests) == 3
    ids = {r["headers"]["X-Canvas-Delivery"] for r in receiver.requests}
    assert len(ids) == 1


def test_it_gives_up_after_three_attempts_without_raising_or_logging_secrets(
    team, secret, receiver, caplog, django_capture_on_commit_callbacks
) -> None:
    receiver.plan = [500] * 10
    with caplog.at_level(logging.DEBUG):
        fire(team, django_capture_on_commit_callbacks)
    assert len(receiver.requests) == MAX_ATTEMPTS == 3
    assert "not delivered after 3 attempts" in caplog.text
    assert secret not in caplog.text and "path-token" not in caplog.text


def test_a_refusal_is_not_retried_and_redirects_are_not_followed(
    team, secret, receiver, django_capture_on_commit_callbacks
) -> None:
    receiver.plan = [404]
    fire(team, django_capture_on_commit_callbacks)
    assert len(receiver.requests) == 1
    receiver.plan = [302]
    fire(team, django_capture_on_commit_callbacks)
    assert [r["path"] for r in receiver.requests][1:] == ["/services/T1/B2/path-token"]


def test_a_timeout_is_retried(
    team, secret, receiver, monkeypatch, django_capture_on_commit_callbacks
) -> None:
    monkeypatch.setattr(notify, "TIMEOUT_SECONDS", 0.3)
    receiver.delay = 1.5  # only the first request hangs
    fire(team, django_capture_on_commit_callbacks)
    assert len(receiver.requests) == 2


def test_an_unreachable_webhook_never_raises_into_the_caller(
    user, team, caplog, django_capture_on_commit_callbacks
) -> None:
    # A port nothing listens on: bind one, remember it, close it.
    probe = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = probe.server_address[1]
    probe.server_close()
    notification_set(by=user, team=team, url=f"http://127.0.0.1:{port}/x")
    with caplog.at_level(logging.WARNING):
        fire(team, django_capture_on_commit_callbacks)  # no exception
    assert f"not delivered after {MAX_ATTEMPTS} attempts" in caplog.text
    assert f"conversation {CONVERSATION}" in caplog.text


def test_a_broken_broker_never_raises_into_the_caller(
    team, secret, monkeypatch, caplog, django_capture_on_commit_callbacks
) -> None:
    def down(**_):
        raise ConnectionError("broker down")

    monkeypatch.setattr(notify_webhook, "apply_async", down)
    with caplog.at_level(logging.ERROR):
        fire(team, django_capture_on_commit_callbacks)  # no exception
    assert f"could not enqueue a notification for conversation {CONVERSATION}" in caplog.text
    assert "broker down" in caplog.text


# --- the SSRF guard at send time (common/netguard.py, common/safe_http.py) -------------------


def test_a_webhook_saved_while_allowed_is_not_called_once_loopback_is_refused(
    user, team, receiver, settings, caplog, django_capture_on_commit_callbacks
) -> None:
    # Saved while the site allowed loopback; the real resolver answers for "localhost".
    notification_set(by=user, team=team, url=f"http://localhost:{receiver.port}/hook-token")
    fire(team, django_capture_on_commit_callbacks)
    assert len(receiver.requests) == 1

    settings.CANVAS_ALLOWED_PRIVATE_NETWORKS = []
    with caplog.at_level(logging.WARNING):
        fire(team, django_capture_on_commit_callbacks)
    assert len(receiver.requests) == 1  # refused for good: not sent, not retried
    assert "localhost is a loopback name" in caplog.text
    assert "hook-token" not in caplog.text


def test_a_literal_loopback_webhook_is_refused_at_send(
    team, secret, receiver, settings, caplog, django_capture_on_commit_callbacks
) -> None:
    settings.CANVAS_ALLOWED_PRIVATE_NETWORKS = ["10.0.0.0/8"]  # some other range
    with caplog.at_level(logging.WARNING):
        fire(team, django_capture_on_commit_callbacks)
    assert receiver.requests == []
    assert "127.0.0.1 is a loopback address" in caplog.text


REBINDING = "hooks.rebind.test"


@pytest.fixture
def rebinding_dns(monkeypatch) -> list[str]:
    """A name whose first answer is 127.0.0.1 and which fails every later lookup, as a DNS
    rebinding attacker's name would answer with an internal address. Other names (and the
    numeric hosts a connect looks up) go to the real resolver."""
    real = socket.getaddrinfo
    lookups: list[str] = []

    def resolver(host, port, *args, **kwargs):
        if host != REBINDING:
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        if len(lookups) > 1:
            raise socket.gaierror(socket.EAI_NONAME, "rebound")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    return lookups


def test_the_connection_goes_to_the_address_that_was_checked(
    user, team, receiver, rebinding_dns, django_capture_on_commit_callbacks
) -> None:
    notification_set(by=user, team=team, url=f"http://{REBINDING}:{receiver.port}/x?a=1")
    rebinding_dns.clear()  # the save-time check looked the name up too
    fire(team, django_capture_on_commit_callbacks)
    assert rebinding_dns == [REBINDING]  # looked up once, to check; the connect used that answer
    (request,) = receiver.requests
    assert request["path"] == "/x?a=1"
    assert request["headers"]["Host"] == f"{REBINDING}:{receiver.port}"
