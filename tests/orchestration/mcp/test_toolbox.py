"""The worker's MCP client against a real stdio server in the sandbox: listing, calls, an error
result, servers that cannot start, and no process left once the toolbox is closed."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestration.mcp.launch import LaunchError, server_launch
from orchestration.mcp.rules import clean_server, config_from_row
from orchestration.mcp.tool import McpArgs, mcp_tool
from orchestration.mcp.toolbox import McpToolbox
from tests.conftest import wait_for

from .fixture import MARKER, READONLY, server_fields, server_pids


class Row:
    """What config_from_row reads, without the database."""

    def __init__(self, name: str, **fields) -> None:
        self.name = name
        for key, value in clean_server(fields).items():
            setattr(self, key, value)


@pytest.fixture(autouse=True)
def visible_venv(settings) -> None:
    settings.CANVAS_SANDBOX_READONLY_PATHS = READONLY


@pytest.fixture
def toolbox() -> Iterator[McpToolbox]:
    box = McpToolbox()
    yield box
    box.close()
    wait_for(lambda: not server_pids(), 10, message=f"servers left: {server_pids()}")


def launch(tmp_path: Path, name: str = "files", secrets=None, **fields):
    config = config_from_row(Row(name, **(fields or server_fields())))
    return server_launch(config, secrets=secrets or {}, workspace=str(tmp_path), network="none")


def test_tools_are_listed_and_called(toolbox, tmp_path) -> None:
    tools, failed = toolbox.open([launch(tmp_path)])
    assert failed == []
    assert sorted(t.name for t in tools) == ["count", "echo", "env_value", "fail", "header_value"]
    echo = mcp_tool(next(t for t in tools if t.name == "echo"), toolbox)
    assert echo is not None and echo.name == "mcp__files__echo"
    schema = echo.schema()["function"]["parameters"]
    assert schema["required"] == ["text", "security_risk"]
    result = echo.run(McpArgs.model_validate({"text": "hi"}), _ctx())
    assert (result.content, result.is_error) == ("echo: hi", False)
    failing = toolbox.call("files", "fail", {"reason": "out of paper"}, cancel=None)
    assert failing.is_error and "out of paper" in failing.content
    wrong = toolbox.call("files", "echo", {"nope": 1}, cancel=None)
    assert wrong.is_error and "text" in wrong.content
    assert len(server_pids()) >= 1


def test_the_server_sees_only_its_own_environment(toolbox, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("WORKER_ONLY", "worker-secret")
    fields = server_fields(env={"TOKEN": {"secret": "API_TOKEN"}, "PLAIN": "text"})
    tools, failed = toolbox.open([launch(tmp_path, secrets={"API_TOKEN": "tok-123456"}, **fields)])
    assert failed == [] and tools

    def ask(name: str) -> str:
        return toolbox.call("files", "env_value", {"name": name}, cancel=None).content

    assert (ask("TOKEN"), ask("PLAIN"), ask("WORKER_ONLY")) == ("tok-123456", "text", "(unset)")
    assert ask("DATABASE_URL") == "(unset)"


def test_servers_that_cannot_start_are_reported_and_the_others_work(toolbox, tmp_path) -> None:
    crashing = launch(tmp_path, "crash", **server_fields(command="/bin/false", args=[]))
    tools, failed = toolbox.open([crashing, launch(tmp_path)])
    assert {t.server for t in tools} == {"files"}
    (failure,) = failed
    assert failure.server == "crash" and failure.reason


def test_a_missing_command_or_secret_never_starts(tmp_path) -> None:
    with pytest.raises(LaunchError, match="not found"):
        launch(tmp_path, **server_fields(command="no-such-mcp-server", args=[]))
    with pytest.raises(LaunchError, match="API_TOKEN"):
        launch(tmp_path, **server_fields(env={"T": {"secret": "API_TOKEN"}}))


def test_a_silent_server_times_out_and_is_killed(toolbox, tmp_path) -> None:
    sleep = ["-c", "import time; time.sleep(60)", MARKER]
    silent = launch(tmp_path, "silent", **server_fields(args=sleep))
    _, failed = toolbox.open([silent], timeout=1)
    assert "did not answer within 1s" in failed[0].reason


def test_an_interrupted_call_returns_at_once(toolbox, tmp_path) -> None:
    toolbox.open([launch(tmp_path)])
    cancel = threading.Event()
    cancel.set()
    result = toolbox.call("files", "echo", {"text": "x"}, cancel=cancel)
    assert result.is_error and "interrupted" in result.content


def _ctx():
    from orchestration.tools.base import ToolContext

    return ToolContext(conversation_id="x", workspace=None, cancel=None)  # type: ignore[arg-type]


def test_a_failure_never_shows_the_secrets_the_server_was_given(toolbox, tmp_path) -> None:
    leaky = server_fields(
        command="/bin/sh", args=["-c", 'echo "token is $TOKEN" >&2; exit 3', MARKER],
        env={"TOKEN": {"secret": "API_TOKEN"}},
    )  # fmt: skip
    _, (failure,) = toolbox.open(
        [launch(tmp_path, secrets={"API_TOKEN": "tok-leak-98765"}, **leaky)]
    )
    assert "exited with code 3" in failure.reason
    assert "token is <secret:API_TOKEN>" in failure.reason
    assert "tok-leak-98765" not in failure.reason


def test_an_interrupt_stops_waiting_for_servers_that_start_slowly(toolbox, tmp_path) -> None:
    sleep = ["-c", "import time; time.sleep(60)", MARKER]
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    started = time.monotonic()
    assert toolbox.open([launch(tmp_path, **server_fields(args=sleep))], cancel=cancel) == ([], [])
    assert time.monotonic() - started < 20  # the 0.5 s interrupt, not the server's 60 s


def test_a_kept_server_is_never_reused_under_another_network_secret_or_folder(tmp_path) -> None:
    """The pool takes a server back only when it would be launched the same way: a policy
    tightened to no network, a changed secret value or another workspace starts a new one."""
    from dataclasses import replace

    from orchestration.mcp.pool import fingerprint

    env = {"env": {"TOKEN": {"secret": "TOKEN"}}}
    first = launch(tmp_path, secrets={"TOKEN": "one-value"}, **server_fields(**env))
    assert fingerprint([first]) == fingerprint(
        [launch(tmp_path, secrets={"TOKEN": "one-value"}, **server_fields(**env))]
    )
    host = replace(first, stdio=replace(first.stdio, network="host"))
    other_secret = launch(tmp_path, secrets={"TOKEN": "two-value"}, **server_fields(**env))
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    moved = launch(elsewhere, secrets={"TOKEN": "one-value"}, **server_fields(**env))
    prints = {fingerprint([x]) for x in (first, host, other_secret, moved)}
    assert len(prints) == 4
    assert "one-value" not in fingerprint([first])  # a digest, never the value
