"""No command outlives the process that started it, and a new runner stops what an old one left.

Real commands, real bubblewrap (and the unsandboxed launcher), real SIGKILLs of a real parent
process. A command is found by a unique marker in its argv (`sleep 300.<digits>`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from orchestration.control.hooks import HookSpec, run_hook
from tests.conftest import wait_for
from tests.escape import sandbox_broken
from workspaces import sandbox
from workspaces.local import LocalWorkspace
from workspaces.sandbox import SandboxSpec

REPO = Path(__file__).resolve().parents[2]

# Runs LocalWorkspace.run (or a hook) in a process of its own that the test then SIGKILLs.
_PARENT = r"""
import sys, threading
import django
django.setup()
from pathlib import Path
what, root, state, command = sys.argv[1:5]
def go():
    if what == "hook":
        from orchestration.control.hooks import HookSpec, run_hook
        run_hook(HookSpec("h", "Stop", command, timeout=600), {}, cwd=root)
    else:
        from workspaces.local import LocalWorkspace
        LocalWorkspace(Path(root), Path(state)).run(command, timeout=600)
# From a pool thread, as a Celery worker with the threads pool starts them.
worker = threading.Thread(target=go)
worker.start()
worker.join()
"""


def marker() -> str:
    return f"300.{uuid.uuid4().int % 10**12:012d}"


def alive_with(mark: str) -> list[int]:
    """Pids whose argv contains `mark`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                if mark.encode() in f.read():
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.fixture(params=["sandboxed", "unsandboxed"])
def mode(request, settings) -> str:
    if request.param == "sandboxed":
        yield request.param
        return
    with sandbox_broken(settings, allow_unsandboxed=True):
        yield request.param


def parent_env(mode: str) -> dict[str, str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "canvas.settings"}
    if mode == "unsandboxed":
        env |= {"CANVAS_BWRAP": "/bin/false", "CANVAS_UNSANDBOXED_COMMANDS": "true"}
    return env


@pytest.mark.parametrize("what", ["command", "hook"])
def test_a_command_dies_with_the_process_that_started_it(mode, what, tmp_path) -> None:
    root, state, mark = tmp_path / "root", tmp_path / "state", marker()
    root.mkdir()
    # A background job and a foreground one: the whole group must go, not only the shell.
    command = (
        f"(sleep {mark}; echo end >> side) & echo start >> side; sleep {mark}; echo end >> side"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, what, str(root), str(state), command],
        cwd=REPO, env=parent_env(mode), start_new_session=True,
    )  # fmt: skip
    try:
        side = root / "side"
        wait_for(lambda: side.exists() and len(alive_with(mark)) >= 2, 30, message="a start")
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        wait_for(lambda: not alive_with(mark), 5, 0.05, message="the command to die with it")
    finally:
        for pid in alive_with(mark):  # a failed run leaves nothing behind either
            os.kill(pid, signal.SIGKILL)
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
    assert (root / "side").read_text() == "start\n"


def test_a_command_outlives_the_thread_that_started_it(mode, tmp_path) -> None:
    """PR_SET_PDEATHSIG (bwrap's --die-with-parent uses it) fires when the *thread* that forked
    the child ends: a command started from a short-lived thread must not die with that thread."""
    spec = SandboxSpec(cwd=tmp_path, writable=(tmp_path,), env={"PATH": sandbox.PATH})
    started: list[subprocess.Popen[bytes]] = []
    starter = threading.Thread(
        target=lambda: started.append(
            sandbox.popen(
                spec,
                ["bash", "-c", "read x; echo got $x"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )  # fmt: skip
        )
    )
    starter.start()
    starter.join()
    # join() returns a moment before the kernel thread is gone: wait for the kernel's view.
    task = Path(f"/proc/self/task/{starter.native_id}")
    wait_for(lambda: not task.exists(), 5, 0.01, message="the starting thread to end")
    (proc,) = started
    out, _ = proc.communicate(b"go\n", timeout=30)
    assert out == b"got go\n" and proc.returncode == 0


def test_recovery_stops_the_group_a_previous_runner_left_running(mode, tmp_path) -> None:
    """The death signal missed it (here: its runner is still alive, as after a lost lease)."""
    root, state, mark = tmp_path / "root", tmp_path / "state", marker()
    old = LocalWorkspace(root, state)
    results = []
    runner = threading.Thread(
        target=lambda: results.append(
            old.run(f"echo start >> side; sleep {mark}; echo end >> side", timeout=600)
        )
    )
    runner.start()
    wait_for(lambda: alive_with(mark), 30, message="the command to start")
    assert LocalWorkspace(root, state).stop_leftovers() == 1
    assert not alive_with(mark)  # gone before stop_leftovers returns: nothing else ran yet
    runner.join(10)
    assert results and results[0].exit_code != 0
    assert (root / "side").read_text() == "start\n"
    assert LocalWorkspace(root, state).stop_leftovers() == 0  # the record went with it
    assert not list(state.glob("run-*"))


def test_recovery_never_kills_a_recycled_pid_or_another_hosts_command(tmp_path) -> None:
    ws, mark = LocalWorkspace(tmp_path / "root", tmp_path / "state"), marker()
    bystander = subprocess.Popen(["sleep", mark], start_new_session=True)
    try:
        ws.record_command(bystander.pid, start_ticks=1)  # the pid now names another process
        ws.record_command(bystander.pid, host="elsewhere")  # recorded on another machine
        assert ws.stop_leftovers() == 0  # it kills, when it does, before returning
        assert bystander.poll() is None and alive_with(mark)
        assert len(list(ws.state_dir.glob("run-*.pid"))) == 1  # left for the other machine
    finally:
        bystander.kill()
        bystander.wait()


def test_a_hook_that_times_out_leaves_nothing_running(mode, tmp_path) -> None:
    mark = marker()
    outcome = run_hook(
        HookSpec("slow", "Stop", f"(sleep {mark}) & sleep {mark}", timeout=1), {}, cwd=str(tmp_path)
    )
    assert "timed out" in outcome.failure
    wait_for(lambda: not alive_with(mark), 5, 0.05, message="the hook's processes to end")
