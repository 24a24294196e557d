"""The agent tree's reads: nested level by level (one query per depth level, never per node),
direct children oldest first, and the path of parents."""

from __future__ import annotations

import pytest

from conversations import tree
from conversations.models import Conversation
from tests.factories import make_conversation

pytestmark = pytest.mark.django_db


def child(parent: Conversation, name: str, **fields) -> Conversation:
    return make_conversation(
        owner=parent.owner, team=parent.team, parent=parent, name=name, title=f"t-{name}",
        subagent_type="general", parent_action_id=f"call-{name}", **fields,
    )  # fmt: skip


@pytest.fixture
def three_levels(user) -> dict[str, Conversation]:
    """root -> a, b; a -> a1, a2; b -> b1; a1 -> a1x: three levels below the root."""
    rows = {"root": make_conversation(owner=user, title="Root")}
    for name, parent in [
        ("a", "root"), ("b", "root"), ("a1", "a"), ("a2", "a"), ("b1", "b"), ("a1x", "a1"),
    ]:  # fmt: skip
        rows[name] = child(rows[parent], name, status="running", steps=len(name))
    return rows


def shape(nodes: list[tree.TreeNode]) -> list:
    return [(n.name, shape(n.children)) if n.children else n.name for n in nodes]


def test_subtree_nests_every_level_oldest_first(three_levels):
    nodes = tree.subtree(three_levels["root"].pk)
    assert shape(nodes) == [("a", [("a1", ["a1x"]), "a2"]), ("b", ["b1"])]
    a = nodes[0]
    assert (a.id, a.subagent_type, a.status, a.steps) == (
        three_levels["a"].pk, "general", "running", 1,
    )  # fmt: skip
    assert a.parent_action_id == "call-a" and a.label == "a" and a.active
    assert a.created_at == three_levels["a"].created_at


def test_subtree_costs_one_query_per_level(three_levels, django_assert_num_queries):
    # Three levels of children, and one read that finds the fourth empty.
    with django_assert_num_queries(4):
        tree.subtree(three_levels["root"].pk)
    # A wider tree at the same depth costs the same.
    for i in range(5):
        child(three_levels["b1"], f"b1-{i}")
    with django_assert_num_queries(4):
        nodes = tree.subtree(three_levels["root"].pk)
    assert len(nodes[1].children[0].children) == 5


def test_subtree_stops_at_max_nodes(three_levels, django_assert_max_num_queries):
    with django_assert_max_num_queries(2):
        nodes = tree.subtree(three_levels["root"].pk, max_nodes=3)
    assert shape(nodes) == [("a", ["a1"]), "b"]


def test_a_conversation_without_children_has_an_empty_tree(user, django_assert_num_queries):
    root = make_conversation(owner=user)
    with django_assert_num_queries(1):
        assert tree.subtree(root.pk) == []
    assert tree.children_of(root.pk) == []


def test_children_of_lists_direct_children_only(three_levels, django_assert_num_queries):
    with django_assert_num_queries(1):
        rows = tree.children_of(three_levels["a"].pk)
    assert [r.name for r in rows] == ["a1", "a2"]
    assert all(r.children == [] for r in rows)


def test_ancestors_walk_up_to_the_top_level(three_levels, django_assert_num_queries):
    root, a, a1 = three_levels["root"], three_levels["a"], three_levels["a1"]
    with django_assert_num_queries(4):  # the row, then a1, a and root
        path = tree.ancestors(three_levels["a1x"].pk)
    assert path == [(root.pk, "Root"), (a.pk, "t-a"), (a1.pk, "t-a1")]
    assert tree.ancestors(root.pk) == []


def test_ancestor_paths_of_many_conversations_share_one_query_per_level(
    three_levels, django_assert_num_queries
):
    r = three_levels
    parents = {r[k].pk: r[k].parent_id for k in ("a1x", "b1", "a2", "root")}
    with django_assert_num_queries(2):  # a1, b and a; then root (a is known already)
        paths = tree.ancestor_paths(parents)
    assert [label for _, label in paths[r["a1x"].pk]] == ["Root", "t-a", "t-a1"]
    assert [label for _, label in paths[r["b1"].pk]] == ["Root", "t-b"]
    assert [label for _, label in paths[r["a2"].pk]] == ["Root", "t-a"]
    assert r["root"].pk not in paths


def test_a_label_falls_back_to_title_then_type(user):
    root = make_conversation(owner=user)
    make_conversation(owner=user, team=root.team, parent=root, title="Fix it", status="finished")
    make_conversation(owner=user, team=root.team, parent=root, subagent_type="explore")
    first, second = tree.subtree(root.pk)
    assert (first.label, second.label) == ("Fix it", "explore")
    assert not tree.any_active([first, second])
