"""The browser pages and their htmx fragments, through Django's test client."""

from __future__ import annotations

import pytest
from django.urls import reverse

from conversations import store
from conversations.events import ActionEvent, AgentMessageEvent, ObservationEvent, Status
from conversations.models import Conversation, ConversationEvent
from orchestration.services import conversation_create

pytestmark = pytest.mark.django_db

XSS = "<script>alert(1)</script>"


@pytest.fixture(autouse=True)
def _no_dispatch(dispatched):
    """Creating and posting start runs; capture the slice enqueues instead of sending them."""
    return dispatched


@pytest.fixture
def alice_client(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def conversation(user):
    return conversation_create(owner=user, prompt="list the files", model="scripted")


def _detail(c: Conversation, name: str = "conversation-detail") -> str:
    return reverse(name, args=[c.pk])


def test_pages_require_login(client, conversation):
    for url in (reverse("conversation-list"), _detail(conversation)):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))
    for name in ("conversation-message", "conversation-pause"):
        response = client.post(_detail(conversation, name), {"text": "hi"})
        assert response.status_code == 302
    assert client.post(reverse("conversation-new"), {"prompt": "x"}).status_code == 302
    assert client.get(reverse("login")).status_code == 200


def test_login_form_logs_in(client, user):
    response = client.post(
        reverse("login"), {"username": "alice", "password": "alice-password-1"}, follow=True
    )
    assert response.redirect_chain[-1][0] == reverse("conversation-list")
    assert b"alice" in response.content


def test_list_shows_own_conversations_only(alice_client, conversation, other_user):
    foreign = conversation_create(owner=other_user, prompt="secret plans", model="scripted")
    response = alice_client.get(reverse("conversation-list"))
    assert response.status_code == 200
    page = response.content.decode()
    assert _detail(conversation) in page
    assert "list the files" in page
    assert str(foreign.pk) not in page
    assert "secret plans" not in page
    assert 'id="new-conversation"' in page


def test_list_poll_returns_only_the_rows_partial(alice_client, conversation):
    response = alice_client.get(reverse("conversation-list"), HTTP_HX_REQUEST="true")
    page = response.content.decode()
    assert response.status_code == 200
    assert page.strip().startswith('<div id="conversation-rows"')
    assert 'hx-trigger="every 2s"' in page
    assert "<html" not in page
    assert "new-conversation" not in page
    assert "Running" in page
    assert "HX-Request" in response["Vary"]


def test_foreign_conversation_is_404(alice_client, other_user):
    foreign = conversation_create(owner=other_user, prompt="secret plans", model="scripted")
    before = foreign.last_seq
    assert alice_client.get(_detail(foreign)).status_code == 404
    assert (
        alice_client.post(_detail(foreign, "conversation-message"), {"text": "hi"}).status_code
        == 404
    )
    assert alice_client.post(_detail(foreign, "conversation-pause")).status_code == 404
    foreign.refresh_from_db()
    assert foreign.last_seq == before
    assert foreign.status == Status.RUNNING


def test_create_redirects_to_the_conversation(alice_client, user, dispatched):
    response = alice_client.post(
        reverse("conversation-new"), {"prompt": "say hello\nplease", "model": "demo"}
    )
    conversation = Conversation.objects.get(owner=user)
    assert response.status_code == 302
    assert response["Location"] == _detail(conversation)
    assert conversation.title == "say hello"
    assert conversation.model == "demo"
    assert conversation.status == Status.RUNNING
    assert dispatched == [(str(conversation.pk), conversation.run_slice)]


def test_create_with_htmx_answers_a_client_redirect(alice_client, user):
    response = alice_client.post(
        reverse("conversation-new"),
        {"prompt": "say hello", "model": "scripted", "workspace": "project-a"},
        HTTP_HX_REQUEST="true",
    )
    conversation = Conversation.objects.get(owner=user)
    assert response.status_code == 200
    assert response["HX-Redirect"] == _detail(conversation)
    assert conversation.workspace_path.endswith("project-a")


def test_create_service_error_is_shown_in_the_form(alice_client):
    response = alice_client.post(
        reverse("conversation-new"),
        {"prompt": "hi", "model": "no-such-profile"},
        HTTP_HX_REQUEST="true",
    )
    page = response.content.decode()
    assert response.status_code == 400
    assert page.strip().startswith('<form id="new-conversation"')
    assert "No model profile named" in page
    assert "no-such-profile" in page  # the typed value is kept
    assert not Conversation.objects.exists()


def test_create_workspace_outside_root_is_refused_on_the_full_page(alice_client):
    response = alice_client.post(
        reverse("conversation-new"), {"prompt": "hi", "model": "demo", "workspace": "/etc"}
    )
    assert response.status_code == 400
    assert b"workspace must be a folder name" in response.content
    assert b"<html" in response.content
    assert not Conversation.objects.exists()


def test_create_form_validation_error(alice_client):
    response = alice_client.post(
        reverse("conversation-new"), {"prompt": "", "model": "demo"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 400
    assert b"This field is required." in response.content


def test_detail_renders_events_and_socket(alice_client, conversation):
    response = alice_client.get(_detail(conversation))
    page = response.content.decode()
    assert response.status_code == 200
    assert f'ws-connect="/ws/ui/conversations/{conversation.pk}/"' in page
    for seq in range(1, conversation.last_seq + 1):
        assert f'id="event-{seq}" data-seq="{seq}"' in page
    assert "event-system-prompt" in page and "<details>" in page
    assert 'id="status-badge" class="badge status-running"' in page
    assert "hx-swap-oob" not in page  # oob markers only travel over the socket


def test_post_message_appends_a_user_message(alice_client, conversation):
    before = conversation.last_seq
    response = alice_client.post(
        _detail(conversation, "conversation-message"),
        {"text": "and the hidden ones too"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    assert response.content.decode().strip().startswith('<form id="message-form"')
    assert b"and the hidden ones too" not in response.content  # a fresh, empty form
    new = ConversationEvent.objects.get(conversation=conversation, seq=before + 1)
    assert new.type == "message.user"
    assert new.payload["text"] == "and the hidden ones too"
    assert new.payload["sender"] == "alice"


def test_post_empty_message_keeps_the_form_with_an_error(alice_client, conversation):
    before = conversation.last_seq
    response = alice_client.post(
        _detail(conversation, "conversation-message"), {"text": "   "}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 400
    assert b"field-error" in response.content
    conversation.refresh_from_db()
    assert conversation.last_seq == before


def test_post_message_without_htmx_redirects(alice_client, conversation):
    response = alice_client.post(_detail(conversation, "conversation-message"), {"text": "more"})
    assert response.status_code == 302
    assert response["Location"] == _detail(conversation)


def test_pause_then_pause_again_conflicts(alice_client, conversation):
    url = _detail(conversation, "conversation-pause")
    response = alice_client.post(url, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert response.content.decode().strip().startswith('<div id="controls"')
    conversation.refresh_from_db()
    assert conversation.status == Status.PAUSED

    response = alice_client.post(url, HTTP_HX_REQUEST="true")
    assert response.status_code == 409
    page = response.content.decode()
    assert 'class="notice"' in page
    assert "not running" in page
    assert "disabled" in page


def test_event_content_is_escaped(alice_client, user):
    conversation = conversation_create(owner=user, prompt=XSS, model="scripted")
    store.append(
        conversation.pk,
        [
            AgentMessageEvent(text=f"agent says {XSS}\nsecond line"),
            ActionEvent(
                tool_call_id="c1",
                tool="terminal",
                arguments=f'{{"command": "echo \\"{XSS}\\""}}',
            ),
            ActionEvent(tool_call_id="c2", tool="think", arguments=f"not json {XSS}"),
            ObservationEvent(tool_call_id="c1", tool="terminal", content=XSS, exit_code=0),
        ],
    )
    page = alice_client.get(_detail(conversation)).content.decode()
    assert XSS not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "agent says &lt;script&gt;alert(1)&lt;/script&gt;\nsecond line" in page
