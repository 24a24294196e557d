"""UserPromptSubmit hooks run on the worker, never in the web process: the message is stored
at once (201), and the run asks the hooks about every user message before the model may read
it. A denial is an event that ends the run; the model never sees the blocked text."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from conversations import store
from conversations.events import (
    AgentErrorEvent,
    UserMessageBlockedEvent,
    UserMessageCheckedEvent,
    UserMessageEvent,
)
from conversations.models import Conversation
from orchestration.chain.slices import run_slice
from orchestration.step.llm import LiteLLMClient
from orchestration.step.profiles import profile_get, profile_with_api_key
from teams.hooks import hook_create
from teams.secrets import secret_create
from tests.api import client_for, send
from tests.runs import script

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "hunter2-prompt-guard-9417"
THINK = {"tool": "think", "args": {"thought": "step"}}


class RecordingLLM:
    """The scripted model behind LiteLLM, keeping a copy of every request's messages."""

    def __init__(self, team_id: int) -> None:
        self.inner = LiteLLMClient(profile_with_api_key(profile_get("scripted", team_id)))
        self.requests: list[list[dict[str, Any]]] = []

    def complete(self, messages, tools):
        self.requests.append(copy.deepcopy(messages))
        return self.inner.complete(messages, tools)

    def texts(self) -> str:
        return json.dumps(self.requests)


def run_one(dispatched: list, llm: RecordingLLM) -> None:
    conversation_id, slice_id = dispatched.pop(0)
    assert run_slice(conversation_id, slice_id, llm=llm) is None


def drive(dispatched: list, llm: RecordingLLM, limit: int = 50) -> None:
    for _ in range(limit):
        if not dispatched:
            return
        run_one(dispatched, llm)
    raise AssertionError("the run did not stop")


def events(conversation_id) -> list:
    return [s.event for s in store.load(conversation_id)]


def status_of(conversation_id) -> str:
    return Conversation.objects.get(pk=conversation_id).status


def guard(user, team, command: str, name: str = "guard"):
    return hook_create(by=user, team=team, name=name, event="UserPromptSubmit", command=command)


DENY_FORBIDDEN = (
    "grep -q forbidden && { echo 'forbidden words; " + SECRET + "' >&2; exit 2; }; exit 0"
)


def test_the_web_request_runs_no_hook_and_the_run_does(user, team, dispatched) -> None:
    guard(user, team, "cat > prompt-seen.json")
    api = client_for(user)
    response = send(api, "post", "/api/conversations", {"prompt": script(), "model": "scripted"})
    assert response.status_code == 201, response.content
    conversation = Conversation.objects.get(pk=response.json()["id"])
    seen = Path(conversation.workspace_path) / "prompt-seen.json"
    assert not seen.exists()  # the web process ran nothing
    llm = RecordingLLM(team.pk)
    drive(dispatched, llm)
    payload = json.loads(seen.read_text())  # the hook ran on the worker, in the workspace
    assert payload["event"] == "UserPromptSubmit" and payload["sender"] == "alice"
    log = events(conversation.pk)
    (checked,) = [e for e in log if isinstance(e, UserMessageCheckedEvent)]
    (message,) = [e for e in log if isinstance(e, UserMessageEvent)]
    assert checked.message_ids == [message.id]
    kinds = [e.type for e in log]
    assert kinds.index("message.checked") < kinds.index("tool.call")  # before the model
    assert status_of(conversation.pk) == "finished"


def test_a_denied_first_message_ends_the_run_with_the_redacted_reason(
    user, team, dispatched
) -> None:
    secret_create(by=user, team=team, name="GUARD_TOKEN", value=SECRET)
    guard(user, team, DENY_FORBIDDEN)
    api = client_for(user)
    response = send(
        api, "post", "/api/conversations", {"prompt": "do the forbidden thing", "model": "scripted"}
    )
    assert response.status_code == 201, response.content  # accepted, like any message
    assert SECRET not in response.content.decode()
    conversation_id = response.json()["id"]
    llm = RecordingLLM(team.pk)
    drive(dispatched, llm)
    assert llm.requests == []  # the model was never asked
    log = events(conversation_id)
    (blocked,) = [e for e in log if isinstance(e, UserMessageBlockedEvent)]
    (message,) = [e for e in log if isinstance(e, UserMessageEvent)]
    assert (blocked.message_id, blocked.hook) == (message.id, "guard")
    assert blocked.reason == "forbidden words; <secret:GUARD_TOKEN>"
    assert status_of(conversation_id) == "error"
    assert [e.type for e in log][-2:] == ["status.changed", "run.finished"]
    assert "guard" in log[-1].reason and "<secret:GUARD_TOKEN>" in log[-1].reason
    listed = send(api, "get", f"/api/conversations/{conversation_id}/events").content.decode()
    assert SECRET not in listed and "message.blocked" in listed
    browser = Client()
    browser.force_login(user)
    page = browser.get(reverse("conversation-detail", args=[conversation_id])).content.decode()
    assert "Message blocked" in page and "&lt;secret:GUARD_TOKEN&gt;" in page
    assert SECRET not in page


def test_a_denied_follow_up_while_running_never_reaches_the_model(
    user, team, dispatched, settings
) -> None:
    settings.CANVAS_SLICE_STEPS = 1
    guard(user, team, DENY_FORBIDDEN)
    api = client_for(user)
    prompt = script(THINK, THINK, THINK)
    created = send(api, "post", "/api/conversations", {"prompt": prompt, "model": "scripted"})
    conversation_id = created.json()["id"]
    llm = RecordingLLM(team.pk)
    run_one(dispatched, llm)  # one step: the prompt is checked, the model thinks once
    assert status_of(conversation_id) == "running" and len(llm.requests) == 1
    posted = send(
        api, "post", f"/api/conversations/{conversation_id}/messages",
        {"text": "now the forbidden part"},
    )  # fmt: skip
    assert posted.status_code == 201, posted.content
    drive(dispatched, llm)
    assert len(llm.requests) == 1 and "forbidden" not in llm.texts()
    assert status_of(conversation_id) == "error"
    (blocked,) = [e for e in events(conversation_id) if isinstance(e, UserMessageBlockedEvent)]
    assert blocked.hook == "guard"

    # The next message starts a run; the model reads it, never the blocked one.
    again = send(
        api, "post", f"/api/conversations/{conversation_id}/messages", {"text": "carry on"}
    )
    assert again.status_code == 201
    drive(dispatched, llm)
    assert len(llm.requests) > 1
    assert "carry on" in llm.texts() and "forbidden" not in llm.texts()
    checked = [e for e in events(conversation_id) if isinstance(e, UserMessageCheckedEvent)]
    assert len(checked) == 2  # the prompt, then "carry on": each checked once


def test_a_broken_hook_is_reported_and_fails_open(user, team, dispatched) -> None:
    guard(user, team, "echo oops >&2; exit 7", name="flaky")
    conversation_id = send(
        client_for(user), "post", "/api/conversations", {"prompt": script(), "model": "scripted"}
    ).json()["id"]
    drive(dispatched, RecordingLLM(team.pk))
    errors = [e for e in events(conversation_id) if isinstance(e, AgentErrorEvent)]
    assert [e.code for e in errors] == ["hook_failed"]
    assert "flaky" in errors[0].message
    assert status_of(conversation_id) == "finished"


def test_a_stop_hooks_reply_is_not_checked_as_a_prompt(user, team, dispatched) -> None:
    # The flag lives in the workspace, the hook's cwd (and the only place it may write).
    hook_create(
        by=user, team=team, name="tests-first", event="Stop",
        command="test -e .asked && exit 0; touch .asked; echo 'run the tests' >&2; exit 2",
    )  # fmt: skip
    guard(user, team, "grep -q 'run the tests' && exit 2; exit 0")
    conversation_id = send(
        client_for(user), "post", "/api/conversations", {"prompt": script(), "model": "scripted"}
    ).json()["id"]
    drive(dispatched, RecordingLLM(team.pk))
    assert not [e for e in events(conversation_id) if isinstance(e, UserMessageBlockedEvent)]
    assert status_of(conversation_id) == "finished"


def test_a_cached_history_rebuilds_its_messages_when_a_message_is_blocked(
    user, team, dispatched
) -> None:
    from orchestration.services import conversation_create
    from orchestration.step.history import history_refresh

    conversation = conversation_create(owner=user, prompt="the forbidden part", model="scripted")
    history = history_refresh(str(conversation.pk))
    assert "forbidden" in json.dumps(history.messages)  # read before any check
    (message,) = [e for e in history.events if isinstance(e, UserMessageEvent)]
    store.append(conversation.pk, [UserMessageBlockedEvent(message_id=message.id, hook="guard")])
    history = history_refresh(str(conversation.pk))
    assert "forbidden" not in json.dumps(history.messages)
    assert [m["role"] for m in history.messages] == ["system"]


def test_checks_are_read_from_the_log_so_a_new_process_never_repeats_one(
    user, team, dispatched, settings
) -> None:
    import orchestration.step.history

    settings.CANVAS_SLICE_STEPS = 1
    guard(user, team, "cat >> prompt-calls.jsonl; echo >> prompt-calls.jsonl")
    created = send(
        client_for(user), "post", "/api/conversations",
        {"prompt": script(THINK, THINK), "model": "scripted"},
    )  # fmt: skip
    conversation = Conversation.objects.get(pk=created.json()["id"])
    llm = RecordingLLM(team.pk)
    run_one(dispatched, llm)
    orchestration.step.history._cache.clear()  # the next slices run in a "fresh worker"
    drive(dispatched, llm)
    assert status_of(conversation.pk) == "finished" and len(llm.requests) == 3
    lines = (Path(conversation.workspace_path) / "prompt-calls.jsonl").read_text().splitlines()
    calls = [json.loads(line) for line in lines if line.strip()]
    assert len(calls) == 1  # the prompt was checked once, by the first slice
