"""The runner's hook call points with hooks configured in the database and run as real
subprocesses."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

import orchestration.control.hooks
from conversations.events import ActionEvent, ObservationEvent
from orchestration.control import hook_points
from teams.hooks import hook_create
from teams.models import Hook
from teams.services import team_default_for

pytestmark = pytest.mark.django_db

CONVERSATION = uuid.uuid4().hex
PY = "python3"  # the system's: hooks run in the sandbox, which has /usr but not our venv


@pytest.fixture
def add(user, team):
    def add(name: str, event: str, command: str, **fields):
        return hook_create(by=user, team=team, name=name, event=event, command=command, **fields)

    return add


def action(tool: str = "terminal", arguments: dict | None = None) -> ActionEvent:
    return ActionEvent(
        tool_call_id="call-1", tool=tool, arguments=json.dumps(arguments or {"command": "ls"})
    )


def pre(team, tmp_path: Path, tool: str = "terminal", arguments: dict | None = None):
    arguments = arguments or {"command": "ls"}
    return hook_points.pre_tool_use(
        team_id=team.pk, conversation_id=CONVERSATION, action=action(tool, arguments),
        arguments=arguments, cwd=str(tmp_path),
    )  # fmt: skip


def test_no_hooks_allows_with_one_query_and_no_subprocess(
    team, tmp_path, monkeypatch, django_assert_num_queries, add
) -> None:
    add("elsewhere", "Stop", "exit 2")  # another event's hooks are not this event's business

    def no_process(*args, **kwargs):
        raise AssertionError("no hook should run")

    monkeypatch.setattr(orchestration.control.hooks.subprocess, "Popen", no_process)
    with django_assert_num_queries(1):
        verdict = pre(team, tmp_path)
    assert verdict == hook_points.HookVerdict(True, "", "", [])


def test_exit_code_2_denies_with_the_hooks_name_and_reason(team, tmp_path, add) -> None:
    add("fine", "PreToolUse", "cat > /dev/null")
    add("guard", "PreToolUse", "echo 'not on main' >&2; exit 2")
    verdict = pre(team, tmp_path)
    assert not verdict.allowed
    assert (verdict.hook, verdict.reason, verdict.failures) == ("guard", "not on main", [])


def test_a_json_decision_denies_after_reading_the_event(team, tmp_path, add) -> None:
    script = tmp_path / "policy.py"
    script.write_text(
        "import json, sys\n"
        "e = json.load(sys.stdin)\n"
        "open('seen.json', 'w').write(json.dumps(e))\n"
        "if 'rm' in e['arguments']['command']:\n"
        "    print(json.dumps({'decision': 'deny', 'reason': 'no rm in ' + e['tool']}))\n"
    )
    add("no-rm", "PreToolUse", f"{PY} {script}")
    assert pre(team, tmp_path, arguments={"command": "ls"}).allowed
    verdict = pre(team, tmp_path, arguments={"command": "rm -rf /"})
    assert not verdict.allowed and verdict.reason == "no rm in terminal"
    assert verdict.hook == "no-rm"
    seen = json.loads((tmp_path / "seen.json").read_text())  # ran in the workspace
    assert seen == {
        "event": "PreToolUse", "conversation_id": CONVERSATION, "tool": "terminal",
        "tool_call_id": "call-1", "arguments": {"command": "rm -rf /"},
    }  # fmt: skip


def test_the_matcher_selects_tools(team, tmp_path, add) -> None:
    add("editor-only", "PreToolUse", "exit 2", matcher="file_.*")
    assert pre(team, tmp_path, tool="terminal").allowed
    assert pre(team, tmp_path, tool="file_editor").hook == "editor-only"
    assert pre(team, tmp_path, tool="my_file_editor").allowed  # the whole name must match


def test_disabled_hooks_do_not_run(team, tmp_path, add) -> None:
    add("off", "PreToolUse", "exit 2", enabled=False)
    assert pre(team, tmp_path).allowed


def test_a_timed_out_hook_is_reported_and_fails_open(team, tmp_path, add) -> None:
    add("lint", "PreToolUse", "sleep 30", timeout_seconds=1)
    add("after", "PreToolUse", "echo 'still asked' >&2; exit 2")
    verdict = pre(team, tmp_path)
    assert verdict.failures == ["hook 'lint' timed out after 1s (fail-open)"]
    assert not verdict.allowed and verdict.hook == "after"  # the chain went on


def test_a_broken_fail_closed_hook_denies(team, tmp_path, add) -> None:
    add("strict", "PreToolUse", "exit 7", fail_closed=True)
    verdict = pre(team, tmp_path)
    assert not verdict.allowed and verdict.hook == "strict"
    assert "configured to block" in verdict.reason
    assert verdict.failures == ["hook 'strict' exited with code 7 (fail-closed)"]


def test_a_matcher_broken_behind_the_services_back_follows_the_fail_mode(
    team, tmp_path, add
) -> None:
    loose = add("loose", "PreToolUse", "true")
    strict = add("strict", "PreToolUse", "true", fail_closed=True)
    Hook.objects.filter(pk=loose.pk).update(matcher="(")
    Hook.objects.filter(pk=strict.pk).update(enabled=False)
    verdict = pre(team, tmp_path)
    assert verdict.allowed
    assert verdict.failures == ["hook 'loose' has an invalid matcher (fail-open)"]
    Hook.objects.filter(pk=strict.pk).update(enabled=True, matcher="[")
    verdict = pre(team, tmp_path)
    assert not verdict.allowed and verdict.hook == "strict"


def test_a_stop_hook_vetoes_finishing_with_its_reason(team, tmp_path, add) -> None:
    command = (
        f"{PY} -c 'import json, sys; e = json.load(sys.stdin); "
        'print(json.dumps({"decision": "deny", "reason": "tests first; you said: " '
        '+ e["final_message"]}))\''
    )
    add("tests-first", "Stop", command)
    verdict = hook_points.stop(
        team_id=team.pk, conversation_id=CONVERSATION, final_message="done", cwd=str(tmp_path)
    )
    assert not verdict.allowed
    assert (verdict.hook, verdict.reason) == ("tests-first", "tests first; you said: done")


def test_post_tool_use_hooks_see_the_observation(team, tmp_path, add) -> None:
    add("record", "PostToolUse", "cat > seen.json")
    observation = ObservationEvent(
        tool_call_id="call-1", tool="terminal", content="total 0", exit_code=0
    )
    verdict = hook_points.post_tool_use(
        team_id=team.pk, conversation_id=CONVERSATION, action=action(), observation=observation,
        cwd=str(tmp_path),
    )  # fmt: skip
    assert verdict.allowed
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["event"] == "PostToolUse" and seen["arguments"] == {"command": "ls"}
    assert seen["observation"]["content"] == "total 0"
    assert seen["observation"]["exit_code"] == 0 and seen["observation"]["is_error"] is False


def test_user_prompt_submit_hooks_read_the_text_and_sender(team, tmp_path, add) -> None:
    add(
        "no-passwords",
        "UserPromptSubmit",
        "grep -q password && { echo 'no passwords' >&2; exit 2; } || true",
    )
    ok = hook_points.user_prompt_submit(
        team_id=team.pk, conversation_id=CONVERSATION, text="hello", sender="alice", cwd=None
    )
    assert ok.allowed
    denied = hook_points.user_prompt_submit(
        team_id=team.pk, conversation_id=CONVERSATION, text="my password is x", sender="alice",
        cwd=None,
    )  # fmt: skip
    assert not denied.allowed and denied.reason == "no passwords"


def test_other_teams_hooks_never_run(team, tmp_path, other_user) -> None:
    other = team_default_for(other_user)
    hook_create(by=other_user, team=other, name="theirs", event="PreToolUse", command="exit 2")
    assert pre(team, tmp_path).allowed
