import time
from pathlib import Path

import pytest

from orchestration.tools.base import ToolContext, tool_schema
from orchestration.tools.registry import DEFAULT_TOOLS, get_tool, tools_for
from orchestration.tools.terminal import TerminalArgs, TerminalTool
from workspaces.local import LocalWorkspace


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(
        conversation_id="c1", workspace=LocalWorkspace(tmp_path / "root", tmp_path / "state")
    )


def run(ctx: ToolContext, command: str, timeout: float | None = None):
    return TerminalTool().run(TerminalArgs(command=command, timeout=timeout), ctx)


def test_output_then_exit_code(ctx: ToolContext) -> None:
    result = run(ctx, "echo hello")
    assert result.content == "hello\n[exit code: 0]"
    assert (result.is_error, result.exit_code, result.finish) == (False, 0, False)


def test_nonzero_exit_is_a_normal_result(ctx: ToolContext) -> None:
    result = run(ctx, "printf 'no newline'; exit 3")
    assert result.content == "no newline\n[exit code: 3]"
    assert (result.is_error, result.exit_code) == (False, 3)


def test_no_output(ctx: ToolContext) -> None:
    assert run(ctx, "true").content == "[exit code: 0]"


def test_timeout_is_an_error_with_partial_output(ctx: ToolContext) -> None:
    started = time.monotonic()
    result = run(ctx, "echo partial; sleep 30", timeout=0.5)
    assert time.monotonic() - started < 10  # the timeout and the kill's grace, not the 30 s
    assert result.content == "partial\n[command timed out after 0.5s; output above is partial]"
    assert (result.is_error, result.exit_code) == (True, None)


def test_cwd_persists_between_calls(ctx: ToolContext) -> None:
    run(ctx, "mkdir -p src && cd src")
    assert run(ctx, "pwd").content == f"{ctx.workspace.root}/src\n[exit code: 0]"


@pytest.mark.parametrize("command", ["", "   \n"])
def test_empty_command_is_an_error(ctx: ToolContext, command: str) -> None:
    result = run(ctx, command)
    assert result.is_error
    assert "empty" in result.content


@pytest.mark.parametrize("timeout", [0, -1, 1801])
def test_timeout_bounds_are_validated(timeout: float) -> None:
    with pytest.raises(ValueError):
        TerminalArgs(command="true", timeout=timeout)


def test_schema_describes_arguments() -> None:
    schema = tool_schema(TerminalTool())
    assert schema["function"]["name"] == "terminal"
    props = schema["function"]["parameters"]["properties"]
    assert schema["function"]["parameters"]["required"] == ["command", "security_risk"]
    assert props["command"]["description"]
    assert props["timeout"]["description"]


def test_registry() -> None:
    assert [tool.name for tool in tools_for(DEFAULT_TOOLS)] == list(DEFAULT_TOOLS)
    assert get_tool("terminal") is get_tool("terminal")
    assert get_tool("nope") is None
    assert {t.name: t.read_only for t in tools_for(DEFAULT_TOOLS)} == {
        "terminal": False,
        "file_editor": False,
        "think": True,
        "finish": True,
        "task": True,
        "delegate": True,
        "workflow": True,
        "invoke_skill": True,
    }  # spawning changes nothing itself: each child's actions face its own approvals
    with pytest.raises(KeyError, match="nope"):
        tools_for(["terminal", "nope"])


def test_think_and_finish(ctx: ToolContext) -> None:
    think, finish = tools_for(["think", "finish"])
    thought = think.run(think.args_model(thought="hmm"), ctx)
    assert (thought.content, thought.finish) == ("Your thought has been logged.", False)
    done = finish.run(finish.args_model(message="All done."), ctx)
    assert (done.content, done.finish, done.is_error) == ("All done.", True, False)


def test_only_tools_that_change_things_ask_for_a_security_risk():
    from orchestration.tools.base import tool_schema
    from orchestration.tools.registry import get_tool

    for name, asks in (
        ("terminal", True),
        ("file_editor", True),
        ("think", False),
        ("finish", False),
    ):
        parameters = tool_schema(get_tool(name))["function"]["parameters"]
        assert ("security_risk" in parameters.get("properties", {})) is asks
        assert ("security_risk" in parameters.get("required", [])) is asks
