"""Hook commands as real subprocesses: allow, deny two ways, timeouts and crashes."""

import time

from orchestration.control.hooks import HookSpec, run_hook, run_hooks

PAYLOAD = {"event": "PreToolUse", "tool": "terminal", "arguments": {"command": "ls"}}


def spec(command: str, **kwargs) -> HookSpec:
    return HookSpec(name="h", event="PreToolUse", command=command, **kwargs)


def test_a_silent_successful_hook_allows():
    assert run_hook(spec("cat > /dev/null"), PAYLOAD).allowed


def test_exit_code_2_denies_with_stderr_as_reason():
    outcome = run_hook(spec("echo 'no ls on fridays' >&2; exit 2"), PAYLOAD)
    assert not outcome.allowed and outcome.reason == "no ls on fridays"


def test_json_deny_decision_reads_the_event_from_stdin():
    command = (
        "python3 -c 'import json,sys; e=json.load(sys.stdin); "
        'print(json.dumps({"decision": "deny", "reason": "saw " + e["tool"]}))\''
    )
    outcome = run_hook(spec(command), PAYLOAD)
    assert not outcome.allowed and outcome.reason == "saw terminal"


def test_timeouts_and_crashes_follow_the_fail_mode():
    started = time.monotonic()
    slow = run_hook(spec("sleep 30", timeout=0.5), PAYLOAD)
    assert time.monotonic() - started < 10  # the 0.5 s timeout and the kill, not the 30 s
    assert slow.allowed and "timed out" in slow.failure
    closed = run_hook(spec("exit 7", fail_closed=True), PAYLOAD)
    assert not closed.allowed and "exited with code 7" in closed.failure
    assert "block" in closed.reason


def test_matchers_select_hooks_and_the_first_denial_stops_the_chain():
    hooks = [
        HookSpec("only-editor", "PreToolUse", "exit 2", matcher="file_editor"),
        HookSpec("deny-terminal", "PreToolUse", "exit 2", matcher="term.*"),
        HookSpec("never-reached", "PreToolUse", "exit 2"),
        HookSpec("other-event", "Stop", "exit 2"),
    ]
    outcomes = run_hooks(hooks, "PreToolUse", PAYLOAD, tool="terminal")
    assert [(o.hook, o.allowed) for o in outcomes] == [("deny-terminal", False)]
