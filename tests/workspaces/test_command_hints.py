"""An agent's command the sandbox cannot run is refused before bwrap tries it, saying how to
show it (its `readonly`, CANVAS_SANDBOX_READONLY_PATHS), instead of bwrap's "execvp ...: No
such file or directory" for a file that exists; npm's scoped paths ('@') are commands too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from acp_bridge.profiles import AcpProfile, AcpProfileValueError, clean_command
from orchestration.external.place import agent_place
from workspaces.mounts import CommandRefused, command_in_view

SCOPED = "node_modules/@zed-industries/codex-acp-linux-x64/bin/codex-acp"


def _program(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def install(tmp_path: Path) -> Path:
    """An npm-style installation outside /usr: node in its bin, a platform binary under '@'."""
    root = tmp_path / "agents"
    _program(root / "bin" / "fakenode", "#!/bin/sh\nexit 0\n")
    _program(root / SCOPED, "#!/usr/bin/env fakenode\n")
    return root


def test_a_scoped_npm_path_is_a_command() -> None:
    assert clean_command(f"/opt/agents/{SCOPED}") == f"/opt/agents/{SCOPED}"
    for bad in ("codex@latest", "/opt/a b", "/opt/a;b"):
        with pytest.raises(AcpProfileValueError):
            clean_command(bad)


def test_a_command_outside_the_view_names_readonly_and_the_site_setting(install) -> None:
    with pytest.raises(CommandRefused) as refused:
        command_in_view(str(install / SCOPED))
    message = str(refused.value)
    assert "exists on this worker" in message and "`readonly`" in message
    assert "CANVAS_SANDBOX_READONLY_PATHS" in message


def test_a_script_whose_interpreter_is_not_shown_is_refused_naming_it(install, monkeypatch):
    monkeypatch.setenv("PATH", f"{install / 'bin'}{os.pathsep}{os.environ['PATH']}")
    command = str(install / SCOPED)
    with pytest.raises(CommandRefused) as refused:
        command_in_view(command, readonly=[str(install / "node_modules")], path="/usr/bin:/bin")
    message = str(refused.value)
    assert "run by fakenode" in message and f"it is {install / 'bin' / 'fakenode'}" in message
    assert "`readonly`" in message and "CANVAS_SANDBOX_READONLY_PATHS" in message
    assert "profile's PATH" in message
    # Shown, and on the agent's PATH: it runs by its own path.
    path = f"{install / 'bin'}:/usr/bin:/bin"
    assert command_in_view(command, readonly=[str(install)], path=path) == command


@pytest.mark.django_db
def test_a_site_profile_gets_the_hint_before_its_agent_starts(user, team, install):
    from orchestration import services
    from teams.policies import policy_for_team

    conversation = services.conversation_create(owner=user, prompt="hello", model="demo")
    profile = AcpProfile(
        name="codex", command=str(install / SCOPED), source="site",
        readonly=(str(install / "node_modules"),),
    )  # fmt: skip
    where = agent_place(conversation, policy=policy_for_team(team.pk), profile=profile)
    assert where.error is not None and "'codex'" in where.error and "run by fakenode" in where.error
    shown = AcpProfile(
        name="codex", command=str(install / SCOPED), source="site", readonly=(str(install),),
        env={"PATH": f"{install / 'bin'}:/usr/bin:/bin"},
    )  # fmt: skip
    where = agent_place(conversation, policy=policy_for_team(team.pk), profile=shown)
    assert where.error is None and where.command == str(install / SCOPED)
