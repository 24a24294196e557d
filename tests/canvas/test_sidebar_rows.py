"""What a sidebar row says: the whole title, the status in a word, the age, a fork's origin."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from canvas.templatetags.sidebar_text import ago_text, short_status
from conversations.models import Conversation
from tests.factories import make_conversation

LONG = "Script the nightly export of the billing tables and check every row count"


def _row(html: str, title: str) -> str:
    rows = re.findall(r'<li class="sidebar-row.*?</li>', html, re.S)
    return next(r for r in rows if f'title="{title}"' in r)


@pytest.mark.django_db
def test_a_row_has_the_whole_title_a_status_word_its_age_and_a_fork_mark(client, user):
    source = make_conversation(owner=user, title=LONG, status="waiting_for_confirmation")
    fork = make_conversation(owner=user, title="Try it another way", forked_from=source)
    Conversation.objects.filter(pk=source.pk).update(
        updated_at=datetime.now(UTC) - timedelta(hours=3)
    )
    client.force_login(user)
    html = client.get(reverse("conversation-sidebar")).content.decode()

    row = _row(html, LONG)
    assert f">{LONG}</a>" in row  # whole, never cut on the server
    assert (
        '<span class="status-word status-word-waiting_for_confirmation">Needs approval</span>'
        in row
    )
    assert ">3 h ago</time>" in row and "fork-mark" not in row

    row = _row(html, fork.title)
    assert "Idle</span>" in row and ">just now</time>" in row
    assert f'<span class="fork-mark" title="Forked from “{LONG}”">fork' in row


def test_ages_in_words():
    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    assert [ago_text(now - timedelta(seconds=s), now) for s in (5, 60 * 7, 3600 * 5, 86400 * 3)] == [
        "just now", "7 min ago", "5 h ago", "3 d ago",
    ]  # fmt: skip
    assert ago_text(now - timedelta(days=40), now) == "24 Oct 2026"
    assert ago_text(now + timedelta(seconds=30), now) == "just now"  # a clock a little ahead


def test_status_words_are_short_and_unknown_ones_readable():
    assert short_status("running") == "Running"
    assert short_status("waiting_for_subagents") == "Waiting for sub-agents"
    assert short_status("some_new_state") == "Some new state"
