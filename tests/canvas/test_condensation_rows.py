"""A condensation on the conversation page: a collapsed marker that opens on its summary, and
the events it replaced still on the page above it (only the agent's View forgot them)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from canvas.event_rows import event_row
from canvas.formatting import event_line
from conversations import store
from conversations.events import CondensationEvent, UserMessageEvent
from tests.factories import make_conversation

pytestmark = pytest.mark.django_db

SUMMARY = "## Task\nFix the build.\n## Open problems\nThe `make` target <fails>."


def condensation(**fields) -> CondensationEvent:
    return CondensationEvent(forgotten_ids=["a", "b", "c"], summary=SUMMARY, offset=2, **fields)


def test_a_condensation_is_its_own_kind_of_row() -> None:
    assert event_row(9, condensation()).kind == "condensation"
    assert event_line(9, condensation()).startswith("#9 condensation 3 events summarised: ## Task")
    assert "hard reset" in event_line(9, condensation(hard_reset=True))


def test_the_page_shows_a_collapsed_marker_with_the_summary(browser, user) -> None:
    conversation = make_conversation(owner=user)
    earlier = UserMessageEvent(text="the forgotten message")
    store.append(conversation.pk, [earlier, condensation()])
    page = browser.get(reverse("conversation-detail", args=[conversation.pk])).content.decode()
    assert "the forgotten message" in page  # the log keeps it; only the View forgot it
    row = page.split('class="event event-condensation', 1)[1].split("</article>", 1)[0]
    assert '<details class="condensation" data-marker="condensation">' in row
    assert "<details open" not in row  # collapsed until opened
    assert "History condensed" in row and "3 earlier events summarised" in row
    assert "<h2>Task</h2>" in row and "<code>make</code>" in row  # the summary, as Markdown
    assert "&lt;fails&gt;" in row and "<fails>" not in row  # escaped like any model text


def test_a_hard_reset_and_a_refusal_say_so(browser, user) -> None:
    conversation = make_conversation(owner=user)
    store.append(conversation.pk, [condensation(hard_reset=True, trigger="context_window")])
    page = browser.get(reverse("conversation-detail", args=[conversation.pk])).content.decode()
    row = page.split('class="event event-condensation', 1)[1].split("</article>", 1)[0]
    assert "History reset" in row and "3 earlier events dropped" in row
    assert "refused its context as too long" in row
