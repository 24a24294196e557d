"""The "show all" endpoint: a tool result's whole output, only to who may read the conversation."""

from __future__ import annotations

from django.test import Client
from django.urls import reverse

from conversations import store
from conversations.events import ObservationEvent, UserMessageEvent
from tests.factories import make_conversation


def test_show_all_answers_the_whole_output_escaped_and_only_to_members(user, other_user):
    conversation = make_conversation(user)
    content = "\n".join(f"line {i} <b>" for i in range(5000))
    stored = store.append(
        conversation.pk,
        [
            UserMessageEvent(text="hi"),
            ObservationEvent(tool_call_id="c", tool="terminal", content=content),
        ],
    )
    message_seq, result_seq = (s.seq for s in stored)

    def url(seq: int) -> str:
        return reverse("conversation-event-output", args=[conversation.pk, seq])

    client = Client()
    client.force_login(user)
    html = client.get(url(result_seq)).content.decode()
    assert html.count("line ") == 5000 and "line 4999 &lt;b&gt;" in html and "<b>" not in html
    assert client.get(url(message_seq)).status_code == 404  # not a tool result
    assert client.get(url(result_seq + 5)).status_code == 404
    stranger = Client()
    stranger.force_login(other_user)
    assert stranger.get(url(result_seq)).status_code == 404
