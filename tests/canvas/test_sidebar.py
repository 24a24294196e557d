"""The conversation sidebar: search by title and message text, filters, archive and restore."""

import pytest
from django.urls import reverse

from common.errors import Conflict
from conversations.models import Conversation
from conversations.search import ConversationFilter, conversations_matching
from orchestration import archive, services
from teams.audit import audit_records
from teams.models import Role
from teams.services import member_add, team_default_for

pytestmark = pytest.mark.django_db


def make(owner, prompt: str, *, model: str = "scripted", status: str = "finished") -> Conversation:
    conversation = services.conversation_create(owner=owner, model=model, prompt=prompt)
    Conversation.objects.filter(pk=conversation.pk).update(status=status)
    return Conversation.objects.get(pk=conversation.pk)


def titles(rows) -> list[str]:
    return sorted(c.title for c in rows)


def test_search_matches_titles_and_message_text_case_insensitively(user, dispatched):
    first = make(user, "Fix the login page")
    make(user, "Write release notes")
    services.conversation_post_message(
        conversation_id=first.pk, text="also check the PASSWORD reset", sender=user
    )
    rows = Conversation.objects.all()
    assert titles(conversations_matching(rows, ConversationFilter(text="release"))) == [
        "Write release notes"
    ]
    assert titles(conversations_matching(rows, ConversationFilter(text="password"))) == [
        "Fix the login page"
    ]
    assert titles(conversations_matching(rows, ConversationFilter(text="nowhere"))) == []


def test_filters_by_status_owner_model_and_archived(user, other_user, dispatched):
    mine = make(user, "mine", status="error")
    make(user, "mine too", model="demo")
    theirs = make(other_user, "theirs")
    archive.conversation_archive(conversation_id=theirs.pk, by=other_user)
    rows = Conversation.objects.all()
    assert titles(conversations_matching(rows, ConversationFilter(status="error"))) == ["mine"]
    assert titles(conversations_matching(rows, ConversationFilter(model="demo"))) == ["mine too"]
    assert titles(conversations_matching(rows, ConversationFilter(owner_id=user.pk))) == [
        "mine", "mine too",
    ]  # fmt: skip
    assert titles(conversations_matching(rows, ConversationFilter(archived=True))) == ["theirs"]
    assert mine.title in titles(conversations_matching(rows, ConversationFilter()))
    assert "theirs" not in titles(conversations_matching(rows, ConversationFilter()))


def test_filter_from_a_query_ignores_what_it_does_not_know(user):
    chosen = ConversationFilter.from_query(
        {"q": "  hi ", "status": "bogus", "owner": "me", "archived": "1"}, user_id=user.pk
    )
    assert chosen == ConversationFilter(text="hi", owner_id=user.pk, archived=True, top_level=True)


def test_a_running_conversation_is_not_archived(user, dispatched):
    running = make(user, "busy", status="running")
    with pytest.raises(Conflict, match="pause or finish it first"):
        archive.conversation_archive(conversation_id=running.pk, by=user)


def test_archive_and_restore_are_audited_and_idempotent(user, dispatched):
    conversation = make(user, "old work")
    archive.conversation_archive(conversation_id=conversation.pk, by=user)
    archive.conversation_archive(conversation_id=conversation.pk, by=user)
    archive.conversation_restore(conversation_id=conversation.pk, by=user)
    kinds = [r.kind for r in audit_records(conversation.team)]
    assert kinds.count("conversation.archived") == 1 and kinds.count("conversation.restored") == 1
    assert Conversation.objects.get(pk=conversation.pk).archived_at is None


def test_the_sidebar_rows_endpoint_filters_and_only_shows_the_users_teams(
    client, user, other_user, dispatched
):
    make(user, "Alpha task")
    make(user, "Beta task")
    make(other_user, "Alpha secret of another team")
    client.force_login(user)
    page = client.get(reverse("conversation-sidebar"), {"q": "alpha"}).content.decode()
    assert "Alpha task" in page and "Beta task" not in page
    assert "another team" not in page


def test_a_viewer_cannot_archive(client, user, django_user_model, dispatched):
    conversation = make(user, "keep me")
    viewer = django_user_model.objects.create_user("victor", password="victor-password-1")
    member_add(by=user, team=team_default_for(user), username="victor", role=Role.VIEWER)
    client.force_login(viewer)
    response = client.post(reverse("conversation-archive", args=[conversation.pk]))
    assert response.status_code == 403
    assert Conversation.objects.get(pk=conversation.pk).archived_at is None


def test_the_api_lists_with_the_same_filters_and_archives(client, user, dispatched):
    kept = make(user, "Deploy the docs")
    make(user, "Other work")
    client.force_login(user)
    listed = client.get("/api/conversations", {"q": "docs"}).json()
    assert [c["title"] for c in listed] == ["Deploy the docs"]
    answer = client.patch(
        f"/api/conversations/{kept.pk}", {"archived": True}, content_type="application/json"
    )
    assert answer.status_code == 200 and answer.json()["archived_at"]
    assert [c["title"] for c in client.get("/api/conversations").json()] == ["Other work"]
    archived = client.get("/api/conversations", {"archived": "true"}).json()
    assert [c["title"] for c in archived] == ["Deploy the docs"]
    restored = client.patch(
        f"/api/conversations/{kept.pk}", {"archived": False}, content_type="application/json"
    )
    assert restored.json()["archived_at"] is None
    empty = client.patch(f"/api/conversations/{kept.pk}", {}, content_type="application/json")
    assert empty.status_code == 400 and "nothing to change" in empty.content.decode()
    bad = client.get("/api/conversations", {"status": "sleeping"})
    assert bad.status_code == 400 and "status" in bad.content.decode()


def test_delete_removes_the_row_the_log_and_its_own_folders(
    client, user, dispatched, django_capture_on_commit_callbacks
):
    from pathlib import Path

    from conversations.models import ConversationEvent

    conversation = make(user, "to be deleted")
    workspace = Path(conversation.workspace_path)
    (workspace / "notes.txt").write_text("draft")
    client.force_login(user)
    with django_capture_on_commit_callbacks(execute=True):  # the folders go after the commit
        answer = client.delete(f"/api/conversations/{conversation.pk}")
    assert answer.status_code == 204
    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    assert not ConversationEvent.objects.filter(conversation_id=conversation.pk).exists()
    assert not workspace.exists()
    kinds = [r.kind for r in audit_records(team_default_for(user))]
    assert "conversation.deleted" in kinds


def test_the_log_still_refuses_any_other_delete(user, dispatched):
    from django.db import IntegrityError, transaction

    from conversations.models import ConversationEvent

    conversation = make(user, "kept")
    with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
        ConversationEvent.objects.filter(conversation_id=conversation.pk).delete()
    with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
        Conversation.objects.filter(pk=conversation.pk).delete()
    assert ConversationEvent.objects.filter(conversation_id=conversation.pk).exists()


def test_only_the_owner_or_an_admin_deletes_and_never_while_running(
    client, user, django_user_model, dispatched
):
    conversation = make(user, "alice's")
    member = django_user_model.objects.create_user("mia", password="mia-password-1")
    member_add(by=user, team=team_default_for(user), username="mia", role=Role.MEMBER)
    client.force_login(member)
    assert client.delete(f"/api/conversations/{conversation.pk}").status_code == 403
    running = make(user, "busy", status="running")
    client.force_login(user)
    assert client.delete(f"/api/conversations/{running.pk}").status_code == 409
    assert Conversation.objects.filter(pk__in=[conversation.pk, running.pk]).count() == 2
