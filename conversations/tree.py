"""The agent tree: a conversation's sub-agent conversations, nested, its path of parents, and
how many sub-agents each row of a list spawned.

Read-only, plain ORM queries over `Conversation.parent` (indexed). Reads go level by level
with `parent__in`, so their cost is one query per depth level however many nodes a level
holds: the page re-renders the tree on every child's step, and a per-node query there would
grow with the fan-out. Callers have already checked access to the root: children share
their parent's team.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from .events import Status
from .models import Conversation

MAX_NODES = 500
MAX_ANCESTORS = 32
"""How far up `ancestors` walks: far past any depth the policy allows, and it stops a
cycle (only a hand-edited row could make one) from walking for ever."""
ACTIVE = frozenset({Status.RUNNING, Status.WAITING_FOR_CONFIRMATION, Status.WAITING_FOR_SUBAGENTS})
"""A node in one of these may still change: a page showing it keeps polling the tree."""

_FIELDS = (
    "id",
    "parent_id",
    "title",
    "name",
    "subagent_type",
    "status",
    "steps",
    "cost_usd",
    "parent_action_id",
    "created_at",
)


@dataclass(slots=True)
class TreeNode:
    """One sub-agent conversation, with its own children (oldest first)."""

    id: uuid.UUID
    name: str
    subagent_type: str
    status: str
    steps: int
    cost_usd: Decimal
    parent_action_id: str
    created_at: datetime
    title: str = ""
    children: list[TreeNode] = field(default_factory=list)

    @property
    def label(self) -> str:
        """What a person calls it: its name among its siblings, else its title."""
        return self.name or self.title or self.subagent_type or "sub-agent"

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def subtree_active(self) -> bool:
        """It or one of its descendants may still change: a Stop on it has work to do."""
        return self.active or any_active(self.children)


def _node(row: dict) -> TreeNode:
    row = dict(row)
    row.pop("parent_id")
    return TreeNode(**row)


def _level(parent_ids: list, limit: int) -> list[tuple[uuid.UUID, TreeNode]]:
    rows = (
        Conversation.objects.filter(parent__in=parent_ids)
        .order_by("created_at", "id")
        .values(*_FIELDS)[:limit]
    )
    return [(row["parent_id"], _node(row)) for row in rows]


def children_of(conversation_id: uuid.UUID | str) -> list[TreeNode]:
    """Direct children, oldest first, without their own children (one query)."""
    return [node for _, node in _level([conversation_id], MAX_NODES)]


def subtree(root_id: uuid.UUID | str, *, max_nodes: int = MAX_NODES) -> list[TreeNode]:
    """The root's descendants nested under their parents: the root's children, oldest
    first. At most `max_nodes` of them (the deepest and youngest are left out first); one
    query per depth level, plus one that finds the last level has no children."""
    top: list[TreeNode] = []
    by_id: dict[uuid.UUID, TreeNode] = {}
    parent_ids: list = [root_id]
    remaining = max_nodes
    while parent_ids and remaining > 0:
        level = _level(parent_ids, remaining)
        remaining -= len(level)
        for parent_id, node in level:
            (by_id[parent_id].children if parent_id in by_id else top).append(node)
            by_id[node.id] = node
        parent_ids = [node.id for _, node in level]
    return top


def with_children_count(rows: QuerySet[Conversation]) -> QuerySet[Conversation]:
    """`rows` with `children_count`: how many sub-agents each spawned directly. A correlated
    subquery on the parent index, not a JOIN with COUNT: the visibility filter already joins
    memberships, and counting over two joins would multiply."""
    count = (
        Conversation.objects.filter(parent=OuterRef("pk"))
        .order_by()
        .values("parent")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return rows.annotate(
        children_count=Coalesce(Subquery(count, output_field=IntegerField()), Value(0))
    )


def ancestors(conversation_id: uuid.UUID | str) -> list[tuple[uuid.UUID, str]]:
    """The conversation's parent, its parent's parent, ... as (id, title or name), the
    top-level conversation first; [] for a top-level one. One query per level."""
    parent_id = (
        Conversation.objects.filter(pk=conversation_id).values_list("parent_id", flat=True).first()
    )
    return ancestor_paths({conversation_id: parent_id}).get(conversation_id, [])


def ancestor_paths(
    parents: dict[uuid.UUID | str, uuid.UUID | None],
) -> dict[uuid.UUID | str, list[tuple[uuid.UUID, str]]]:
    """Many conversations' paths of parents at once, given each one's parent id: id -> path
    (top-level conversation first), only for those with a parent. One query per level for
    all of them together (the approvals inbox shows a path on each of its rows)."""
    paths: dict = {key: [] for key, parent in parents.items() if parent is not None}
    heads = {key: parent for key, parent in parents.items() if parent is not None}
    seen: dict[uuid.UUID, tuple[uuid.UUID | None, str]] = {}
    for _ in range(MAX_ANCESTORS):
        wanted = {p for p in heads.values() if p not in seen}
        if wanted:
            rows = Conversation.objects.filter(pk__in=wanted).order_by()
            for pk, parent_id, title, name in rows.values_list("pk", "parent_id", "title", "name"):
                seen[pk] = (parent_id, title or name)
        for key, head in list(heads.items()):
            if head not in seen:  # deleted under us: the path ends here
                del heads[key]
                continue
            grand, label = seen[head]
            paths[key].append((head, label))
            if grand is None or len(paths[key]) >= MAX_ANCESTORS:
                del heads[key]
            else:
                heads[key] = grand
        if not heads:
            break
    return {key: path[::-1] for key, path in paths.items()}


def any_active(nodes: Iterable[TreeNode]) -> bool:
    """Whether any node of a nested list may still change (ACTIVE)."""
    return any(node.active or any_active(node.children) for node in nodes)
