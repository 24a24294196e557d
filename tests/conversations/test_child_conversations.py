"""A sub-agent's conversation points at its parent and the tool call that spawned it; the API
shows both, and a parent with children cannot be deleted out from under them."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.db.models import ProtectedError

from tests.factories import make_conversation

pytestmark = pytest.mark.django_db


def test_a_top_level_conversation_has_no_parent(api, user):
    c = make_conversation(owner=user)
    body = api.get(f"/api/conversations/{c.pk}").json()
    assert body["parent_id"] is None
    assert body["parent_action_id"] == ""


def test_a_child_shows_its_parent_and_the_spawning_call(api, user):
    parent = make_conversation(owner=user)
    child = make_conversation(
        owner=user, team=parent.team, parent=parent, parent_action_id="call_7",
        subagent_type="general", name="tests",
    )  # fmt: skip
    body = api.get(f"/api/conversations/{child.pk}").json()
    assert body["parent_id"] == str(parent.pk)
    assert body["parent_action_id"] == "call_7"
    assert list(parent.children.all()) == [child]


def test_a_parent_with_children_is_protected_from_a_plain_delete(user):
    parent = make_conversation(owner=user)
    make_conversation(owner=user, team=parent.team, parent=parent)
    with pytest.raises(ProtectedError), transaction.atomic():
        parent.delete()
