"""A held external call's arguments reach the inbox as an object, also when empty or sent as
JSON text: Gemini CLI asks with rawInput {} (shown before as the string "{}")."""

from __future__ import annotations

import pytest
from acp import schema

from acp_bridge.translate import Translator
from conversations import store
from conversations.events import ActionEvent, Status, StatusChangeEvent
from conversations.models import Conversation
from orchestration.control import approvals
from tests.acp_bridge.turns import start, use_fixture

OPTIONS = [schema.PermissionOption(option_id="proceed_once", name="Allow", kind="allow_once")]


def _held(raw_input) -> ActionEvent:
    call = schema.ToolCallUpdate(
        tool_call_id="g-1", title="Shell", kind="execute", status="pending", raw_input=raw_input
    )
    *_, action = Translator().permission(call, OPTIONS)
    return action


@pytest.mark.parametrize(
    ("raw_input", "shown"),
    [({}, {}), ("{}", {}), ('{"command": "ls"}', {"command": "ls"}), (None, {}),
     ("not json", "not json")],
)  # fmt: skip
def test_held_arguments_are_an_object_where_they_can_be(raw_input, shown) -> None:
    action = _held(raw_input)
    assert action.parsed_arguments.value == shown


@pytest.mark.django_db
def test_the_inbox_shows_empty_arguments_as_an_object(user, settings, dispatched) -> None:
    use_fixture(settings)
    conversation = start(user, "permission")
    action = _held("{}")
    store.append(
        conversation.pk,
        [
            action,
            StatusChangeEvent(status=Status.WAITING_FOR_CONFIRMATION, previous=Status.RUNNING),
        ],
    )
    Conversation.objects.filter(pk=conversation.pk).update(status=Status.WAITING_FOR_CONFIRMATION)
    (pending,) = approvals.pending_actions(conversation.pk)
    assert pending.arguments == {}
