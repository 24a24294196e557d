"""Secrets reach a workspace only as environment of the commands that name them, and are
never saved into the environment that carries over to later commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestration.tools.base import LazySecrets, ToolContext
from orchestration.tools.terminal import TerminalArgs, TerminalTool, referenced_secrets
from workspaces.local import LocalWorkspace

VALUE = "s3cr3t-value-for-env-tests"


@pytest.fixture
def workspace(tmp_path: Path) -> LocalWorkspace:
    return LocalWorkspace(tmp_path / "root", tmp_path / "state")


@pytest.fixture
def loads() -> list[int]:
    return []


@pytest.fixture
def ctx(workspace: LocalWorkspace, loads: list[int]) -> ToolContext:
    def load() -> dict[str, str]:
        loads.append(1)
        return {"MY_TOKEN": VALUE, "OTHER": "other-value-123", "PATH": "/nowhere"}

    return ToolContext(conversation_id="c1", workspace=workspace, secrets=LazySecrets(load))


def run(ctx: ToolContext, command: str) -> str:
    return TerminalTool().run(TerminalArgs(command=command), ctx).content


def saved_state(workspace: LocalWorkspace) -> str:
    return "\n".join(p.read_text() for p in workspace.state_dir.iterdir() if p.is_file())


def test_a_referenced_secret_is_not_saved_nor_seen_by_a_later_command(ctx, workspace) -> None:
    out = run(ctx, 'echo "got $MY_TOKEN"; export KEPT=yes; mkdir -p sub; cd sub')
    assert f"got {VALUE}" in out
    state = saved_state(workspace)
    assert "KEPT" in state and VALUE not in state and "MY_TOKEN" not in state
    assert workspace.current_dir().name == "sub"  # the rest of the state carried over

    later = run(ctx, "env; echo kept=$KEPT")
    assert "kept=yes" in later
    assert VALUE not in later and "MY_TOKEN" not in later and "other-value" not in later


def test_a_variable_derived_from_a_secret_is_not_saved_either(ctx, workspace) -> None:
    run(ctx, 'export HEADER="Bearer ${MY_TOKEN}"; export PLAIN=fine; export MY_TOKEN=changed')
    state = saved_state(workspace)
    assert "PLAIN" in state
    assert VALUE not in state and "HEADER" not in state and "changed" not in state
    assert "HEADER=" not in run(ctx, "env")


def test_only_the_named_secret_is_given(ctx) -> None:
    out = run(ctx, 'echo "[$MY_TOKEN]"; env')
    assert f"[{VALUE}]" in out
    assert "OTHER=" not in out and "other-value-123" not in out


def test_the_secret_wins_over_a_saved_variable_of_the_same_name(ctx, workspace) -> None:
    workspace.run("export MY_TOKEN=stale", timeout=10)
    assert f"[{VALUE}]" in run(ctx, 'echo "[$MY_TOKEN]"')


def test_commands_that_name_no_secret_never_load_them(ctx, loads) -> None:
    run(ctx, "echo $HOME $PATH ${PWD}; ls")
    assert loads == []
    run(ctx, "echo ${#MY_TOKEN}")
    run(ctx, "echo $MY_TOKEN")
    assert loads == [1]  # loaded once, on first use


def test_referenced_names() -> None:
    secrets = {"A": "1", "B_2": "2", "C": "3", "PATH": "4", "BASH_ENV": "5", "LD_PRELOAD": "6"}
    assert referenced_secrets("echo $A ${B_2:0:3} ${#C}", secrets) == {
        "A": "1",
        "B_2": "2",
        "C": "3",
    }
    assert referenced_secrets("echo $PATH $BASH_ENV $LD_PRELOAD $MISSING", secrets) == {}
    assert referenced_secrets("echo A B_2 $a", secrets) == {}


def test_lazy_secrets_never_show_values_in_reprs(ctx) -> None:
    assert VALUE not in repr(ctx)
    dict(ctx.secrets)
    assert VALUE not in repr(ctx) and VALUE not in repr(ctx.secrets)


def test_invalid_extra_env_names_are_refused(workspace) -> None:
    with pytest.raises(ValueError):
        workspace.run("true", timeout=5, extra_env={"BAD NAME": "x"})
