"""Hooks run in the same sandbox as the agent's commands: real hook processes, real bwrap."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from orchestration.control import hook_points
from orchestration.control.hooks import HookSpec, run_hook
from teams.hooks import hook_create
from teams.models import Policy
from tests.escape import CANARY_NAME, assert_contained, escape_script, sandbox_broken

PAYLOAD = {"event": "PreToolUse", "tool": "terminal", "arguments": {"command": "ls"}}
REDIS_PING = "exec 3<>/dev/tcp/127.0.0.1/6379 && printf 'PING\\r\\n' >&3 && head -c 7 <&3"


@pytest.fixture(autouse=True)
def canary(monkeypatch) -> None:
    monkeypatch.setenv(CANARY_NAME, f"canary-{uuid.uuid4().hex}")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


def test_a_hook_cannot_see_or_reach_anything_of_the_workers(tmp_path, workspace) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    command = f"{{ {escape_script(outside=outside)} }} > report.txt 2>&1; exit 0"
    outcome = run_hook(HookSpec("spy", "PreToolUse", command), PAYLOAD, cwd=str(workspace))
    assert outcome.allowed and not outcome.failure, outcome
    assert_contained((workspace / "report.txt").read_text(), outside=outside)


def test_a_hook_without_a_workspace_gets_a_private_tmp(tmp_path) -> None:
    host_file = Path("/tmp") / f"host-{uuid.uuid4().hex}"
    host_file.write_text("host")
    try:
        command = f'[ ! -e {host_file} ] && [ "$PWD" = /tmp ] && touch mine || exit 2'
        assert run_hook(HookSpec("tmp", "Stop", command), PAYLOAD).allowed
        assert not Path("/tmp/mine").exists()
    finally:
        host_file.unlink()


def test_without_a_sandbox_a_hook_fails_naming_the_setting(settings, workspace) -> None:
    with sandbox_broken(settings, allow_unsandboxed=False):
        strict = HookSpec("strict", "PreToolUse", "touch ran", fail_closed=True)
        outcome = run_hook(strict, PAYLOAD, cwd=str(workspace))
    assert not outcome.allowed
    assert "CANVAS_UNSANDBOXED_COMMANDS=true" in outcome.failure
    assert not (workspace / "ran").exists()


@pytest.mark.django_db
def test_hooks_get_the_teams_network_only_where_the_site_allows_host(
    settings, team, user, workspace
) -> None:
    hook_create(
        by=user, team=team, name="ping", event="Stop",
        command=f"( {REDIS_PING} ) > pong.txt 2>&1; true",
    )  # fmt: skip

    def pong() -> str:
        (workspace / "pong.txt").unlink(missing_ok=True)
        verdict = hook_points.stop(
            team_id=team.pk, conversation_id="c", final_message="", cwd=str(workspace)
        )
        assert verdict.allowed and not verdict.failures, verdict
        return (workspace / "pong.txt").read_text()

    assert "PONG" not in pong()  # the default: no network
    Policy.objects.create(team=team, network="host")
    settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK = False
    assert "PONG" not in pong()  # the site does not allow it: still none
    settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK = True
    assert pong().startswith("+PONG")


def test_a_hook_runs_in_a_symlinked_workspace(tmp_path, workspace) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(workspace)
    command = "touch made-here; exit 0"
    assert run_hook(HookSpec("link", "Stop", command), PAYLOAD, cwd=str(alias)).failure == ""
    assert (workspace / "made-here").exists()
