"""The admin shows conversations, their events, hooks, notifications and spend, and edits none
(admin_client: pytest-django's logged-in superuser)."""

from __future__ import annotations

import pytest

from conversations import store
from conversations.events import UserMessageEvent
from conversations.models import Conversation
from teams.models import Hook, TeamNotification, TeamSpend

pytestmark = pytest.mark.django_db

SECRET = "gAAAA-encrypted-signing-secret"


def test_a_conversation_is_read_only_and_links_to_its_events(admin_client, team):
    conversation = Conversation.objects.create(team=team, model="scripted", workspace_path="w")
    store.append(conversation.pk, [UserMessageEvent(text="hello from the log")])
    page = admin_client.get(f"/admin/conversations/conversation/{conversation.pk}/change/")
    assert page.status_code == 200
    events_url = (
        f"/admin/conversations/conversationevent/?conversation__id__exact={conversation.pk}"
    )
    assert events_url.replace("&", "&amp;") in page.content.decode()
    events = admin_client.get(events_url)
    assert events.status_code == 200 and "message.user" in events.content.decode()
    assert admin_client.get("/admin/conversations/conversation/add/").status_code == 403
    delete_url = f"/admin/conversations/conversation/{conversation.pk}/delete/"
    assert admin_client.post(delete_url, {"post": "yes"}).status_code == 403
    assert Conversation.objects.filter(pk=conversation.pk).exists()


def test_hooks_notifications_and_spend_are_listed_without_the_secret(admin_client, team):
    Hook.objects.create(team=team, name="block-force-push", event="PreToolUse", command="true")
    TeamNotification.objects.create(
        team=team, webhook_url="https://hooks.example.com/x", webhook_secret=SECRET
    )
    TeamSpend.objects.create(team=team, month="2026-11-01", cost_usd="1.25")
    for model, shown in (
        ("hook", "block-force-push"),
        ("teamnotification", "https://hooks.example.com/x"),
        ("teamspend", "1.25"),
    ):
        page = admin_client.get(f"/admin/teams/{model}/")
        assert page.status_code == 200 and shown in page.content.decode()
        assert admin_client.get(f"/admin/teams/{model}/add/").status_code == 403
    notification = TeamNotification.objects.get(team=team)
    page = admin_client.get(f"/admin/teams/teamnotification/{notification.pk}/change/")
    assert page.status_code == 200 and SECRET not in page.content.decode()
