"""A scripted run of our own agent on a real Celery worker (Redis, Postgres) calls both tools
of the team's MCP stdio server in the sandbox and records their results; a server whose
command fails is skipped with a warning and the run still finishes; a secret given by
reference reaches the server and is redacted in the log. No server process is left after."""

from __future__ import annotations

import json

import pytest

from conversations import store
from conversations.events import AgentErrorEvent, ObservationEvent
from conversations.models import Conversation
from orchestration import services
from orchestration.mcp.servers import mcp_server_create
from teams.secrets import secret_create
from tests.conftest import wait_for
from tests.runs import script

from .fixture import READONLY, server_fields, server_pids

pytestmark = pytest.mark.worker

TOKEN_VALUE = "mcp-worker-secret-value-0123456789"


@pytest.fixture(autouse=True)
def no_servers_left():
    yield
    # Torn down after start_worker, which stopped the workers: their servers must be gone.
    wait_for(lambda: not server_pids(), 10, message=f"servers left: {server_pids()}")


def call(tool: str, **args) -> dict:
    return {"tool": tool, "args": {**args, "security_risk": "LOW"}}


def test_a_run_on_a_worker_calls_the_teams_mcp_tools(start_worker, user, team):
    start_worker(extra_env={"CANVAS_SANDBOX_READONLY_PATHS": ",".join(READONLY)})
    secret_create(by=user, team=team, name="API_TOKEN", value=TOKEN_VALUE)
    fields = server_fields(env={"TOKEN": {"secret": "API_TOKEN"}})
    mcp_server_create(by=user, team=team, name="files", **fields)
    mcp_server_create(by=user, team=team, name="broken", transport="stdio",
                      command="/bin/false")  # fmt: skip
    prompt = script(
        call("mcp__files__echo", text="from the worker"),
        call("mcp__files__env_value", name="TOKEN"),
        {"tool": "finish", "args": {"message": "done"}},
    )
    conversation = services.conversation_create(owner=user, model="scripted", prompt=prompt)

    def ended() -> bool:
        return Conversation.objects.get(pk=conversation.pk).status in ("finished", "error")

    wait_for(ended, 90, message="the run to finish on the worker")
    assert Conversation.objects.get(pk=conversation.pk).status == "finished"
    events = [s.event for s in store.load(conversation.pk)]
    results = {e.tool: e for e in events if isinstance(e, ObservationEvent)}
    assert results["mcp__files__echo"].content == "echo: from the worker"
    assert results["mcp__files__env_value"].content == "<secret:API_TOKEN>"
    (warning,) = [e for e in events if isinstance(e, AgentErrorEvent)]
    assert warning.code == "mcp_unavailable" and "'broken'" in warning.message
    stored = json.dumps([e.model_dump(mode="json") for e in events])
    assert TOKEN_VALUE not in stored
