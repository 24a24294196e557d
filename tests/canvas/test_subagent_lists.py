"""Sub-agents in the lists: the sidebar and the conversation list show top-level conversations
with a count of sub-agents, the sidebar's filters reach the children, and the approvals inbox
shows a child's path of parents."""

from __future__ import annotations

import re
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from conversations.models import Conversation
from conversations.search import ConversationFilter, conversations_matching
from conversations.tree import with_children_count
from tests.canvas.test_approval_views import FINISH, RISKY, start, terminal
from tests.factories import make_conversation

pytestmark = pytest.mark.django_db(transaction=True)

PATH_READ = re.compile(r'"parent_id" AS "parent_id", \S+ AS "title", \S+ AS "name" FROM')
"""conversations.tree.ancestor_paths' read of one level of parents."""


def child(parent: Conversation, title: str, **fields) -> Conversation:
    return make_conversation(
        owner=parent.owner, team=parent.team, parent=parent, title=title, **fields
    )


@pytest.fixture
def rows(user) -> dict[str, Conversation]:
    root = make_conversation(owner=user, title="Root work")
    kid = child(root, "Kid one", status="running")
    return {
        "root": root,
        "kid": kid,
        "kid2": child(root, "Kid two"),
        "grandkid": child(kid, "Grandkid"),
        "alone": make_conversation(owner=user, title="Alone"),
    }


def sidebar_titles(html: str) -> list[str]:
    rows = re.search(r'<ul id="sidebar-rows".*?</ul>', html, re.S).group(0)
    return re.findall(r'<a href="/conversations/[^"]+/"[^>]*>([^<]+)</a>', rows)


def test_children_count_is_one_subquery_however_many_rows(rows, django_assert_num_queries):
    with django_assert_num_queries(1):
        counts = {c.title: c.children_count for c in with_children_count(Conversation.objects)}
    assert counts == {"Root work": 2, "Kid one": 1, "Kid two": 0, "Grandkid": 0, "Alone": 0}


def test_the_filter_keeps_to_the_top_level_or_one_parents_children(rows):
    every = Conversation.objects.all()

    def titles(f: ConversationFilter) -> set[str]:
        return set(conversations_matching(every, f).values_list("title", flat=True))

    assert titles(ConversationFilter()) == {c.title for c in rows.values()}
    assert titles(ConversationFilter(top_level=True)) == {"Root work", "Alone"}
    assert titles(ConversationFilter(parent_id=rows["root"].pk)) == {"Kid one", "Kid two"}
    assert titles(ConversationFilter(parent_id=rows["kid"].pk, text="grand")) == {"Grandkid"}


def test_the_filter_from_a_query_defaults_to_the_top_level(user):
    assert ConversationFilter.from_query({}, user_id=user.pk).top_level
    assert not ConversationFilter.from_query({"subagents": "1"}, user_id=user.pk).top_level
    parent = uuid.uuid4()
    chosen = ConversationFilter.from_query({"parent": str(parent)}, user_id=user.pk)
    assert (chosen.parent_id, chosen.top_level) == (parent, False)
    assert ConversationFilter.from_query({"parent": "nope"}, user_id=user.pk).parent_id is None


def test_the_sidebar_shows_top_level_rows_with_their_count(client, user, rows):
    client.force_login(user)
    html = client.get(reverse("conversation-sidebar")).content.decode()
    assert sorted(sidebar_titles(html)) == ["Alone", "Root work"]
    assert '<span class="visually-hidden">2 sub-agents</span>' in html
    assert html.count('class="children-count"') == 1

    with_children = client.get(reverse("conversation-sidebar"), {"subagents": "1"})
    assert sorted(sidebar_titles(with_children.content.decode())) == sorted(
        c.title for c in rows.values()
    )
    of_root = client.get(reverse("conversation-sidebar"), {"parent": str(rows["root"].pk)})
    assert sorted(sidebar_titles(of_root.content.decode())) == ["Kid one", "Kid two"]


def test_a_childs_page_keeps_the_sidebar_top_level(client, user, rows):
    client.force_login(user)
    html = client.get(reverse("conversation-detail", args=[rows["kid"].pk])).content.decode()
    assert sorted(sidebar_titles(html)) == ["Alone", "Root work"]
    assert 'name="subagents" value="1">' in html  # offered, not checked
    url = reverse("conversation-detail", args=[rows["kid"].pk])
    asked = client.get(url, {"subagents": "1"}).content.decode()
    assert 'name="subagents" value="1" checked' in asked
    assert "Grandkid" in sidebar_titles(asked)


def test_the_conversation_list_shows_top_level_rows_with_their_count(client, user, rows):
    client.force_login(user)
    html = client.get(reverse("conversation-list"), HTTP_HX_REQUEST="true").content.decode()
    assert "Root work" in html and "Alone" in html
    assert "Kid one" not in html and "Grandkid" not in html
    assert '<span class="children-count">2 sub-agents</span>' in html


def test_the_approvals_inbox_shows_a_childs_path_of_parents(client, user, dispatched):
    top = make_conversation(owner=user, title="Release 2.0")
    middle = child(top, "", name="docs")
    held = start(user, dispatched, terminal(RISKY), FINISH)
    Conversation.objects.filter(pk=held.pk).update(parent=middle, name="checker", title="")
    plain = start(user, dispatched, terminal(RISKY), FINISH)
    client.force_login(user)
    with CaptureQueriesContext(connection) as queries:
        html = client.get(reverse("approvals"), HTTP_HX_REQUEST="true").content.decode()
    article = re.search(
        rf'<article class="card waiting-conversation" data-conversation="{held.pk}".*?</article>',
        html, re.S,
    ).group(0)  # fmt: skip
    path = re.search(r'<p class="parent-path muted">.*?</p>', article, re.S).group(0)
    assert path.index("Release 2.0") < path.index(">docs<")
    assert f'href="/conversations/{top.pk}/"' in path
    assert f'href="/conversations/{middle.pk}/"' in path
    assert ">checker</a>" in article  # a child without a title goes by its name
    other = re.search(rf'data-conversation="{plain.pk}".*?</article>', html, re.S).group(0)
    assert "parent-path" not in other
    # The path costs one query per level of parents, not one per row.
    paths = [q["sql"] for q in queries.captured_queries if PATH_READ.search(q["sql"])]
    assert len(paths) == 2, paths  # docs, then Release 2.0
