"""Scripted conversations of our own agent with the team's MCP servers, driven slice by slice
in this process: tools offered by server prefix, calls and results as ordinary action and
observation events, a risky call held for approval and run by the next slice, a server that
cannot start reported once and the run finishing anyway, a secret by reference reaching the
server and redacted in the log, and the model-profile filter."""

from __future__ import annotations

import json
import time

import pytest
from django.template.loader import render_to_string

from canvas.event_rows import event_row
from conversations import store
from conversations.events import ActionEvent, AgentErrorEvent, ObservationEvent
from orchestration import services
from orchestration.chain.slices import run_slice
from orchestration.control import approvals
from orchestration.external.home import mcp_home
from orchestration.mcp import pool
from orchestration.mcp.servers import mcp_server_create
from teams.secrets import secret_create
from tests.conftest import wait_for
from tests.runs import drive, script

from .fixture import READONLY, server_fields, server_pids

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN_VALUE = "mcp-run-secret-value-0123456789"
FINISH = {"tool": "finish", "args": {"message": "done"}}


@pytest.fixture(autouse=True)
def visible_venv(settings):
    settings.CANVAS_SANDBOX_READONLY_PATHS = READONLY
    yield
    pool.close_all()  # what a failed test left for a next slice (the tests check it is none)
    wait_for(lambda: not server_pids(), 10, message=f"servers left: {server_pids()}")


def call(tool: str, risk: str = "LOW", **args) -> dict:
    return {"tool": tool, "args": {**args, "security_risk": risk}}


def run(user, *turns, model: str = "scripted", dispatched) -> str:
    conversation = services.conversation_create(owner=user, model=model, prompt=script(*turns))
    drive(dispatched)
    return str(conversation.pk)


def events(conversation_id: str) -> list:
    return [s.event for s in store.load(conversation_id)]


def results(conversation_id: str) -> dict[str, ObservationEvent]:
    return {e.tool: e for e in events(conversation_id) if isinstance(e, ObservationEvent)}


def status(conversation_id: str) -> str:
    from conversations.models import Conversation

    return Conversation.objects.get(pk=conversation_id).status


def test_both_tools_are_called_and_their_results_recorded(user, team, dispatched):
    mcp_server_create(by=user, team=team, name="files", **server_fields())
    conversation = run(
        user, call("mcp__files__echo", text="hello"),
        call("mcp__files__fail", reason="out of paper"), FINISH, dispatched=dispatched,
    )  # fmt: skip
    assert status(conversation) == "finished"
    actions = [e for e in events(conversation) if isinstance(e, ActionEvent)]
    assert [a.tool for a in actions][:2] == ["mcp__files__echo", "mcp__files__fail"]
    assert actions[0].security_risk == "LOW" and actions[0].risk == "LOW"
    by_tool = results(conversation)
    echo, fail = by_tool["mcp__files__echo"], by_tool["mcp__files__fail"]
    assert (echo.content, echo.is_error) == ("echo: hello", False)
    assert fail.is_error and "out of paper" in fail.content
    # The run's context records the MCP tools offered, and the page names them.
    stored = next(s for s in store.load(conversation) if s.event.type == "system.context")
    offered = ["mcp__files__count", "mcp__files__echo", "mcp__files__env_value",
               "mcp__files__fail", "mcp__files__header_value"]  # fmt: skip
    assert sorted(stored.event.mcp_tools) == offered
    html = render_to_string("canvas/conversation_detail.html#event-row",
                            {"row": event_row(stored.seq, stored.event)})  # fmt: skip
    assert "MCP tools: " in html and "mcp__files__echo" in html


def test_a_risky_call_waits_for_approval_and_runs_after_it(user, team, dispatched):
    mcp_server_create(by=user, team=team, name="files", **server_fields())
    conversation = run(
        user, call("mcp__files__echo", risk="HIGH", text="approved"), FINISH,
        dispatched=dispatched,
    )  # fmt: skip
    assert status(conversation) == "waiting_for_confirmation"
    (pending,) = approvals.pending_actions(conversation)
    assert (pending.tool, pending.risk) == ("mcp__files__echo", "HIGH")
    assert "mcp__files__echo" not in results(conversation)
    approvals.action_approve(conversation_id=conversation, action_id=pending.action_id, by=user)
    drive(dispatched)
    assert status(conversation) == "finished"
    assert results(conversation)["mcp__files__echo"].content == "echo: approved"


def test_a_server_that_cannot_start_is_skipped_with_a_warning(user, team, dispatched, settings):
    settings.CANVAS_SLICE_STEPS = 1  # the warning must not repeat at every slice
    mcp_server_create(by=user, team=team, name="broken", transport="stdio",
                      command="/bin/false")  # fmt: skip
    mcp_server_create(by=user, team=team, name="files", **server_fields())
    conversation = run(
        user, {"tool": "think", "args": {"thought": "a"}}, call("mcp__files__echo", text="x"),
        call("mcp__broken__anything"), FINISH, dispatched=dispatched,
    )  # fmt: skip
    assert status(conversation) == "finished"
    warnings = [e for e in events(conversation) if isinstance(e, AgentErrorEvent)]
    (warning,) = [w for w in warnings if w.code == "mcp_unavailable"]
    assert "'broken'" in warning.message and "skipped" in warning.message
    (row,) = [event_row(s.seq, s.event) for s in store.load(conversation) if s.event == warning]
    html = render_to_string("canvas/conversation_detail.html#event-row", {"row": row})
    assert "Warning: MCP server skipped" in html
    by_tool = results(conversation)
    assert by_tool["mcp__files__echo"].content == "echo: x"
    assert by_tool["mcp__broken__anything"].is_error  # an unknown tool, as the model reads it


def test_a_secret_reaches_the_server_by_reference_and_is_redacted(user, team, dispatched):
    secret_create(by=user, team=team, name="API_TOKEN", value=TOKEN_VALUE)
    fields = server_fields(env={"TOKEN": {"secret": "API_TOKEN"}})
    mcp_server_create(by=user, team=team, name="files", **fields)
    conversation = run(user, call("mcp__files__env_value", name="TOKEN"), FINISH,
                       dispatched=dispatched)  # fmt: skip
    answer = results(conversation)["mcp__files__env_value"]
    assert answer.content == "<secret:API_TOKEN>"
    stored = json.dumps([s.event.model_dump(mode="json") for s in store.load(conversation)])
    assert TOKEN_VALUE not in stored


def test_servers_serve_only_their_model_profiles_and_only_when_enabled(user, team, dispatched):
    mcp_server_create(by=user, team=team, name="other", model_profiles=["demo"],
                      **server_fields())  # fmt: skip
    mcp_server_create(by=user, team=team, name="off", enabled=False, **server_fields())
    conversation = run(user, call("mcp__other__echo", text="x"), call("mcp__off__echo", text="x"),
                       FINISH, dispatched=dispatched)  # fmt: skip
    by_tool = results(conversation)
    assert "Unknown tool 'mcp__other__echo'" in by_tool["mcp__other__echo"].content
    assert "Unknown tool 'mcp__off__echo'" in by_tool["mcp__off__echo"].content
    assert not [e for e in events(conversation) if isinstance(e, AgentErrorEvent)]


@pytest.mark.parametrize(
    ("tools", "echo", "fail"),
    [
        (None, True, True),  # no list: every MCP tool the parent has
        (["think", "finish"], False, False),  # a list without MCP tools: none of them
        (["finish", "mcp__files__echo"], True, False),  # one by name
        (["finish", "mcp__files__*"], True, True),  # a whole server
    ],
)
def test_a_sub_agents_definition_narrows_the_mcp_tools_it_gets(user, team, dispatched, tools,
                                                              echo, fail):  # fmt: skip
    from conversations.models import Conversation
    from orchestration.subagents.team_agents import team_agent_create

    mcp_server_create(by=user, team=team, name="files", **server_fields())
    team_agent_create(by=user, team=team, name="helper", description="Helps.", tools=tools)
    child = script(call("mcp__files__echo", text="hi"), call("mcp__files__fail", reason="no"),
                   FINISH)  # fmt: skip
    parent = run(
        user, {"tool": "task", "args": {"subagent_type": "helper", "prompt": child}}, FINISH,
        dispatched=dispatched,
    )  # fmt: skip
    assert status(parent) == "finished"
    spawned = Conversation.objects.get(parent_id=parent)
    assert spawned.status == "finished"
    by_tool = results(str(spawned.pk))
    for tool, offered in (("mcp__files__echo", echo), ("mcp__files__fail", fail)):
        unknown = f"Unknown tool {tool!r}" in by_tool[tool].content
        assert unknown is not offered, by_tool[tool].content


def counts(conversation_id: str) -> list[str]:
    return [e.content for e in events(conversation_id)
            if isinstance(e, ObservationEvent) and e.tool == "mcp__files__count"]  # fmt: skip


def test_the_servers_stay_up_between_the_slices_of_a_run(user, team, dispatched, settings):
    """One step per slice: each call is in a slice of its own, and the server keeps its state
    (its count) across them; when the run ends, it is stopped."""
    settings.CANVAS_SLICE_STEPS = 1
    mcp_server_create(by=user, team=team, name="files", **server_fields())
    conversation = services.conversation_create(
        owner=user, model="scripted", prompt=script(call("mcp__files__count"),
                                                    call("mcp__files__count"),
                                                    call("mcp__files__count"), FINISH),
    )  # fmt: skip
    slices, pids = 0, set()
    while dispatched:
        run_slice(*dispatched.pop(0))
        slices += 1
        if status(str(conversation.pk)) == "running":
            assert pool.kept_count() == 1
            pids = pids or set(server_pids())
            assert set(server_pids()) == pids  # the same processes (the sandbox's and its own)
    assert slices >= 4 and status(str(conversation.pk)) == "finished"
    assert counts(str(conversation.pk)) == ["call 1", "call 2", "call 3"]
    assert pool.kept_count() == 0


def test_without_keeping_every_slice_starts_the_servers_again(user, team, dispatched, settings):
    settings.CANVAS_SLICE_STEPS = 1
    settings.CANVAS_MCP_KEEP_SECONDS = 0
    mcp_server_create(by=user, team=team, name="files", **server_fields())
    conversation = run(user, call("mcp__files__count"), call("mcp__files__count"), FINISH,
                       dispatched=dispatched)  # fmt: skip
    assert counts(conversation) == ["call 1", "call 1"]


def test_a_kept_server_is_stopped_when_its_run_does_not_come_back(user, team, dispatched,
                                                                  settings):  # fmt: skip
    """The run's next slice never comes to this process: after CANVAS_MCP_KEEP_SECONDS the
    server is stopped; and a changed launch (here a new secret value) starts it again."""
    settings.CANVAS_SLICE_STEPS = 1
    secret_create(by=user, team=team, name="TOKEN", value="first-value-0123456789")
    mcp_server_create(by=user, team=team, name="files",
                      **server_fields(env={"TOKEN": {"secret": "TOKEN"}}))  # fmt: skip
    conversation = services.conversation_create(
        owner=user, model="scripted",
        prompt=script(call("mcp__files__count"), call("mcp__files__count"),
                      call("mcp__files__count"), FINISH),
    )  # fmt: skip
    run_slice(*dispatched.pop(0))
    assert pool.kept_count() == 1 and server_pids()
    home = mcp_home(str(conversation.pk), "files")  # its private home, in the state folder
    assert home.is_dir() and home.stat().st_mode & 0o777 == 0o700
    assert pool.close_expired(now=time.monotonic() + settings.CANVAS_MCP_KEEP_SECONDS) == 1
    wait_for(lambda: not server_pids(), 10, message="the kept server to stop")
    assert not home.exists()
    run_slice(*dispatched.pop(0))  # started again: its count starts again
    from teams.secrets import secret_update

    secret_update(by=user, team=team, name="TOKEN", value="second-value-0123456789")
    drive(dispatched)  # the new value: not the kept server
    assert counts(str(conversation.pk)) == ["call 1", "call 1", "call 1"]
