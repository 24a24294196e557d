"""The workflow script: refused by rule, replayed against a journal, run in a limited process
(real bubblewrap where it works here, and the plain-process fallback)."""

from __future__ import annotations

import dataclasses
import os
import resource
import time

import pytest

from orchestration.subagents import workflow_script
from orchestration.subagents.workflow_script import (
    ChildRequest,
    Done,
    Failed,
    ScriptLimits,
    ScriptRefused,
    Spawn,
    check_script,
    run_script,
)
from tests.escape import CANARY_NAME, sandbox_broken, worker_values
from workspaces import sandbox

# Tight limits keep the runaway tests short; the defaults are larger.
FAST = ScriptLimits(cpu_seconds=1, memory_bytes=128 * 2**20, wall_seconds=4.0)

MAP_REDUCE = """
async def main(wf):
    words = ["alpha", "beta", "gamma", "delta"]
    found = await wf.map_agents(["count letters in " + w for w in words])
    total = await wf.reduce_agent(found, "add these up")
    return {"parts": found, "total": total}
"""


@pytest.fixture(params=["sandboxed", "unsandboxed"])
def mode(request, settings) -> str:
    if request.param == "sandboxed":
        if not sandbox.sandbox_status().available:
            pytest.skip("no working bubblewrap here")
        yield request.param
        return
    with sandbox_broken(settings, allow_unsandboxed=True):
        yield request.param


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        ("import os\nreturn 1", "no import"),
        ("from os import environ\nreturn 1", "no import"),
        ("return ().__class__", "no dunder names"),
        ("x = __builtins__\nreturn 1", "no dunder names"),
        ("return getattr(wf, 'run_agent')", "forbidden builtin"),
        ("return open('/etc/passwd')", "forbidden builtin"),
        ("exec('1')", "forbidden builtin"),
        ("return eval('1')", "forbidden builtin"),
        ("x = 'a'\nreturn x.format(1)", "attribute access only on wf's API"),
        ("return wf._journal", "attribute access only on wf's API"),
        ("w = wf\nreturn await w.run_agent('hi')", "attribute access only on wf's API"),
        ("wf.run_agent = 1", "attribute access only on wf's API"),
        ("def f():\n    global x\n    x = 1\nreturn 1", "no global or nonlocal"),
        ("class A:\n    pass\nreturn 1", "no class definitions"),
        ("f = lambda x=1: x\nreturn 1", "no lambda"),
        ("try:\n    x = 1\nexcept Exception:\n    pass", "allowed constructs"),
        ("with x:\n    pass", "allowed constructs"),
        ("x = 'a' + 1 +", "valid Python"),
        ("x = 1\n" * 201, "size limit"),
        ("return '" + "a" * 9000 + "'", "size limit"),
        ("def main(wf):\n    return 1", "entry point"),
        ("async def main(wf):\n    return 1\nawait wf.run_agent('x')", "entry point"),
    ],
)
def test_a_forbidden_construct_is_refused_naming_its_rule(source: str, rule: str) -> None:
    with pytest.raises(ScriptRefused) as refused:
        check_script(source)
    assert refused.value.rule == rule
    assert rule in str(refused.value)


def test_allowed_scripts_pass_the_check() -> None:
    check_script(MAP_REDUCE)
    check_script("parts = await wf.map_agents(['a', 'b'])\nreturn ', '.join(parts).upper()")
    check_script("d = {'a': 1}\nreturn sorted(d.items())")


def test_a_refused_script_runs_as_failed_with_its_rule() -> None:
    outcome = run_script("import os\nreturn os.environ", {})
    assert isinstance(outcome, Failed)
    assert "no import" in outcome.message


def test_map_then_reduce_spawns_twice_then_is_done(mode: str) -> None:
    first = run_script(MAP_REDUCE, {})
    assert isinstance(first, Spawn)
    assert [r.prompt for r in first.requests] == [
        f"count letters in {w}" for w in ("alpha", "beta", "gamma", "delta")
    ]
    assert {r.agent for r in first.requests} == {"general"}
    journal = {r.key: len(r.prompt) - len("count letters in ") for r in first.requests}

    second = run_script(MAP_REDUCE, journal)
    assert isinstance(second, Spawn)
    [reduce] = second.requests
    assert reduce.prompt.startswith("add these up\n\nResults:\n")
    assert reduce.key not in journal
    journal[reduce.key] = 19

    third = run_script(MAP_REDUCE, journal)
    assert third == Done({"parts": [5, 4, 5, 5], "total": 19})


def test_same_script_and_journal_give_the_same_keys() -> None:
    source = (
        "names = {'x', 'y', 'z', 'w', 'v'}\n"  # set order must not vary between runs
        "first = await wf.map_agents(['p ' + n for n in names], agent='reviewer')\n"
        "return await wf.pipeline(['one', 'two'], first)"
    )
    runs = [run_script(source, {}) for _ in range(2)]
    assert runs[0] == runs[1]
    assert isinstance(runs[0], Spawn) and len(runs[0].requests) == 5
    assert {r.agent for r in runs[0].requests} == {"reviewer"}
    journal = {r.key: r.prompt.upper() for r in runs[0].requests}
    again = [run_script(source, journal) for _ in range(2)]
    assert again[0] == again[1]
    assert isinstance(again[0], Spawn)
    [step] = again[0].requests
    assert step.key.startswith("6-") and step.prompt.startswith("one\n\nInput:\n")


def test_a_partly_answered_map_asks_only_for_the_rest() -> None:
    source = "return await wf.map_agents(['a', 'b', 'c'])"
    first = run_script(source, {})
    assert isinstance(first, Spawn)
    journal = {first.requests[1].key: "B"}
    second = run_script(source, journal)
    assert second == Spawn([first.requests[0], first.requests[2]])


def test_a_script_error_is_failed_with_its_message_and_line() -> None:
    outcome = run_script("x = 1\ny = {}\nreturn y['missing'] + x", {})
    assert isinstance(outcome, Failed)
    assert outcome.message == "line 3: KeyError: 'missing'"
    bad_prompt = run_script("return await wf.run_agent(3)", {})
    assert isinstance(bad_prompt, Failed)
    assert bad_prompt.message == "line 1: TypeError: each prompt must be a non-empty string"
    assert os.getcwd() not in outcome.message + bad_prompt.message


def test_a_result_that_is_not_json_is_failed() -> None:
    outcome = run_script("return range(3)", {})
    assert isinstance(outcome, Failed) and "not JSON" in outcome.message


def test_too_many_children_is_failed() -> None:
    outcome = run_script(
        "return await wf.map_agents([str(i) for i in range(60)])", {}, limits=ScriptLimits()
    )
    assert outcome == Failed("the workflow asked for more than 50 children")


def test_a_runaway_loop_is_stopped_by_its_cpu_limit(mode: str) -> None:
    own_limits = resource.getrlimit(resource.RLIMIT_CPU), resource.getrlimit(resource.RLIMIT_AS)
    # A loaded machine gives the loop a fraction of a core: a wall limit far above the 1 s
    # of CPU, so the CPU limit is what stops it (the message says which limit did).
    limits = dataclasses.replace(FAST, wall_seconds=30.0)
    started = time.monotonic()
    outcome = run_script("while True:\n    pass", {}, limits=limits)
    assert outcome == Failed("the workflow script used its 1s of CPU time and was stopped")
    assert time.monotonic() - started < limits.wall_seconds
    # The limits were the script process's own: the worker keeps its own and runs on.
    assert (
        resource.getrlimit(resource.RLIMIT_CPU),
        resource.getrlimit(resource.RLIMIT_AS),
    ) == own_limits
    assert run_script("return 2 + 2", {}, limits=FAST) == Done(4)


def test_a_memory_hog_is_stopped_by_its_memory_limit(mode: str) -> None:
    outcome = run_script("x = 'a' * (1024 * 1024 * 1024)\nreturn len(x)", {}, limits=FAST)
    assert outcome == Failed("the workflow script went over its memory limit of 128 MB")


def test_the_wall_clock_limit_kills_the_process(monkeypatch) -> None:
    # The script cannot sleep, so stand in for a stuck one: a runner that blocks.
    monkeypatch.setattr(workflow_script, "_RUNNER", "import time\ntime.sleep(60)")
    started = time.monotonic()
    outcome = run_script("return 1", {}, limits=ScriptLimits(wall_seconds=1.0))
    assert outcome == Failed("the workflow script ran longer than 1 s and was stopped")
    assert time.monotonic() - started < 20  # the 1 s limit, not the runner's 60 s


def test_the_script_process_sees_none_of_the_workers_environment(monkeypatch, mode) -> None:
    # The checker already refuses `os`; this is the second wall: the process itself.
    monkeypatch.setenv(CANARY_NAME, "canary-value")
    monkeypatch.setattr(
        workflow_script,
        "_RUNNER",
        "import json, os, sys\n"
        "sys.stdout.write(json.dumps({'outcome': 'done', 'value': dict(os.environ)}))",
    )
    outcome = run_script("return 1", {})
    assert isinstance(outcome, Done)
    # bwrap sets PWD, and Python's C-locale coercion LC_CTYPE; nothing comes from the worker.
    assert set(outcome.value) <= {"PYTHONHASHSEED", "PWD", "LC_CTYPE"}
    assert outcome.value["PYTHONHASHSEED"] == "0"
    seen = repr(outcome.value)
    assert CANARY_NAME not in seen
    assert not any(value in seen for value in worker_values().values())


def test_without_a_sandbox_or_permission_it_fails_naming_the_setting(settings) -> None:
    with sandbox_broken(settings, allow_unsandboxed=False):
        outcome = run_script("return 1", {})
    assert isinstance(outcome, Failed)
    assert "CANVAS_UNSANDBOXED_COMMANDS=true" in outcome.message


def test_child_request_fields() -> None:
    first = run_script("return await wf.run_agent('hello', agent='critic')", {})
    assert isinstance(first, Spawn)
    [request] = first.requests
    assert isinstance(request, ChildRequest)
    assert (request.prompt, request.agent) == ("hello", "critic")
    assert run_script(
        "return await wf.run_agent('hello', agent='critic')", {request.key: "hi"}
    ) == Done("hi")
