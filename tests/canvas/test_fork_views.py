"""The page's Fork buttons: the header's and each event's, through the views."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from conversations import store
from conversations.events import ActionEvent
from conversations.models import Conversation
from orchestration import services
from tests.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = json.dumps({"script": [
    {"tool": "terminal", "args": {"command": "echo hi > hi.txt", "security_risk": "LOW"}},
    {"tool": "finish", "args": {"message": "done"}},
]})  # fmt: skip


@pytest.fixture
def finished(user, dispatched) -> Conversation:
    conversation = services.conversation_create(owner=user, model="scripted", prompt=SCRIPT)
    drive(dispatched)
    return Conversation.objects.get(pk=conversation.pk)


def test_the_page_offers_fork_on_the_header_and_every_event(user, finished):
    client = Client()
    client.force_login(user)
    page = client.get(f"/conversations/{finished.pk}/").content.decode()
    assert 'class="secondary fork"' in page
    assert page.count('class="link fork-here"') >= finished.last_seq - 2


def test_fork_here_goes_to_the_new_conversation(user, finished):
    client = Client()
    client.force_login(user)
    answer = client.post(f"/conversations/{finished.pk}/fork", {"at_seq": "2"},
                         headers={"HX-Request": "true"})  # fmt: skip
    assert answer.status_code == 200, answer.content
    fork = Conversation.objects.exclude(pk=finished.pk).get()
    assert answer["HX-Redirect"] == f"/conversations/{fork.pk}/"
    assert fork.forked_from_id == finished.pk


def test_a_refused_fork_here_is_shown_beside_its_button(user, finished):
    client = Client()
    client.force_login(user)
    inside = next(s.seq for s in store.load(finished.pk) if isinstance(s.event, ActionEvent))
    answer = client.post(f"/conversations/{finished.pk}/fork", {"at_seq": str(inside)},
                         headers={"HX-Request": "true"})  # fmt: skip
    assert answer.status_code == 400
    html = answer.content.decode()
    # Only the notice, for the empty one beside the button (not the header's controls).
    assert html.startswith('<span class="notice" role="alert">') and "fork at event" in html
    assert 'id="controls"' not in html
    assert Conversation.objects.count() == 1


def test_fork_here_on_a_call_card_cuts_after_its_result(user, finished):
    client = Client()
    client.force_login(user)
    page = client.get(f"/conversations/{finished.pk}/").content.decode()
    events = list(store.load(finished.pk))
    call = next(s for s in events if isinstance(s.event, ActionEvent))
    result = next(s for s in events if getattr(s.event, "tool_call_id", None) == call.event.tool_call_id
                  and s.seq > call.seq and s.event.type == "tool.result")  # fmt: skip
    card = page[page.index(f'id="event-{call.seq}"') : page.index(f'id="event-{call.seq + 1}"')]
    assert f'hx-vals=\'{{"at_seq": "{result.seq}"}}\'' in card
    assert f'"at_seq": "{call.seq}"' not in card
    answer = client.post(f"/conversations/{finished.pk}/fork", {"at_seq": str(result.seq)},
                         headers={"HX-Request": "true"})  # fmt: skip
    assert answer.status_code == 200 and answer["HX-Redirect"], answer.content


def test_a_refused_header_fork_is_shown_by_the_header_buttons(user, finished, monkeypatch):
    from canvas import fork_views
    from common.errors import InvalidInput

    def refuse(**kwargs):
        raise InvalidInput("the workspace is too large to copy.")

    monkeypatch.setattr(fork_views, "conversation_fork", refuse)
    client = Client()
    client.force_login(user)
    answer = client.post(f"/conversations/{finished.pk}/fork", headers={"HX-Request": "true"})
    assert answer.status_code == 400
    html = answer.content.decode()
    assert 'id="controls"' in html and "too large to copy" in html


def test_viewers_cannot_fork(user, finished, django_user_model):
    from teams.services import member_add

    viewer = django_user_model.objects.create_user("vera", password="vera-password-1")
    member_add(by=user, team=finished.team, username="vera", role="viewer")
    client = Client()
    client.force_login(viewer)
    page = client.get(f"/conversations/{finished.pk}/").content.decode()
    assert "fork-here" not in page
    assert client.post(f"/conversations/{finished.pk}/fork").status_code == 403
    assert Conversation.objects.count() == 1
