"""`python manage.py worker` (canvas/worker_supervisor.py, issue 27): one plain Celery worker per
process, all ready, a run through them, a warm stop that leaves nothing behind, a killed child
replaced, and a child that cannot start ending the command with its exit code."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from conversations.models import Conversation
from tests.conftest import WorkerProcess, wait_for
from tests.runs import script

STOP_SECONDS = 30
"""An idle worker stops within 15 s of SIGTERM (docs/deploy.md); its siblings stop alongside."""
FAST_RECOVERY = {"CANVAS_LEASE_SECONDS": "3", "CANVAS_SWEEP_SECONDS": "1"}


class SupervisedWorkers(WorkerProcess):
    """`manage.py worker` in its own session, announcing its children's pids in the ready file."""

    def __init__(self, tmp: Path, *, processes: int = 2, extra: tuple[str, ...] = (), **kwargs):
        super().__init__(tmp, pool_args=(), **kwargs)
        self.processes = processes
        self.extra = extra

    def start(self, timeout: float = 120) -> SupervisedWorkers:
        super().start(timeout)
        return self

    def argv(self) -> list[str]:
        return [
            sys.executable, "manage.py", "worker", "--processes", str(self.processes),
            "--threads", "2", "--name", self.ready_file.stem, *self.celery_args(), *self.extra,
        ]  # fmt: skip

    def pids(self) -> list[int]:
        return [int(line) for line in self.ready_file.read_text().split()]

    def output(self) -> str:
        return self.log_path.read_text()


def _stat(pid: str) -> list[str]:
    """A process's /proc stat fields after its name: state, ppid, pgrp, ..."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def processes() -> dict[int, tuple[int, int]]:
    """Every process: pid -> (parent, process group)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = _stat(entry.name)
            except OSError:
                continue
            if fields[0] != "Z":
                found[int(entry.name)] = (int(fields[1]), int(fields[2]))
    return found


def descendants(pid: int) -> set[int]:
    table = processes()
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, (parent, _) in table.items() if parent in frontier} - found
        found |= frontier
    return found


def group_left(group: int) -> list[int]:
    return [pid for pid, (_, pgrp) in processes().items() if pgrp == group]


def status_of(conversation) -> str:
    return Conversation.objects.get(pk=conversation.pk).status


@pytest.mark.worker
def test_ready_children_run_a_conversation_and_stop_whole_on_sigterm(start_worker):
    workers = start_worker(SupervisedWorkers, processes=2)
    pids = workers.pids()
    assert len(set(pids)) == 2
    # The command became the plain supervisor in place (same pid), Django left behind.
    supervisor = Path(f"/proc/{workers.proc.pid}/cmdline").read_text().split("\0")
    assert supervisor[2].endswith("canvas/worker_supervisor.py"), supervisor
    assert set(pids) <= descendants(workers.proc.pid)
    for index, pid in enumerate(pids):
        argv = Path(f"/proc/{pid}/cmdline").read_text().split("\0")
        assert f"{workers.ready_file.stem}-{index}@%h" in argv
        assert argv[argv.index("-c") + 1] == "2" and argv[argv.index("-P") + 1] == "threads"

    conversation = _run(
        script(
            {"tool": "think", "args": {"thought": "one"}},
            {"tool": "finish", "args": {"message": "done"}},
        )
    )
    wait_for(lambda: status_of(conversation) == "finished", 60, message="run to finish")

    os.kill(workers.proc.pid, signal.SIGTERM)  # the main process only, as `docker stop` does
    try:
        workers.proc.wait(STOP_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running {STOP_SECONDS}s after SIGTERM:\n{workers.output()[-3000:]}")
    assert workers.proc.returncode == 0, workers.output()[-3000:]
    assert group_left(workers.proc.pid) == [], "a child outlived the command"
    assert "SIGTERM: stopping 2 workers" in workers.output()


@pytest.mark.worker
def test_a_killed_child_is_replaced_and_the_run_finishes(start_worker):
    workers = start_worker(SupervisedWorkers, processes=2, beat=True, extra_env=FAST_RECOVERY)
    before = workers.pids()
    conversation = _run(
        script(
            {"tool": "terminal", "args": {"command": "touch sleeping.txt; sleep 6; echo slept"}},
            {"tool": "terminal", "args": {"command": "echo resumed > after-kill.txt"}},
            {"tool": "finish", "args": {"message": "survived"}},
        )
    )
    sleeping = Path(conversation.workspace_path) / "sleeping.txt"  # all a command may write
    wait_for(sleeping.exists, 60, message="the sleep command to be running")
    (running,) = [pid for pid in before if any(_is_sleep(p) for p in descendants(pid))]
    os.kill(running, signal.SIGKILL)

    wait_for(
        lambda: len(after := workers.pids()) == 2 and running not in after,
        60, message="a replacement child to be ready",
    )  # fmt: skip
    assert set(before) - {running} <= set(workers.pids())  # its sibling ran on
    wait_for(lambda: status_of(conversation) == "finished", 90, message="recovery")
    marker = Path(conversation.workspace_path) / "after-kill.txt"  # all a command may write
    assert marker.read_text().strip() == "resumed"
    assert f"(pid {running}) died with signal SIGKILL" in workers.output()


@pytest.mark.worker
def test_a_child_that_cannot_start_ends_the_command_with_its_exit_code(tmp_path):
    workers = SupervisedWorkers(tmp_path, processes=2, extra=("--no-such-option",))
    with pytest.raises(RuntimeError, match="worker did not start") as failed:
        workers.start()
    message = str(failed.value)
    assert "exited before it was ready 3 times in a row, the last with exit code 2" in message
    assert "No such option '--no-such-option'" in message  # the child's own output, above
    assert workers.proc.returncode == 1  # CommandError
    assert group_left(workers.proc.pid) == [], "a child outlived the command"


@pytest.mark.parametrize("option", ["-c", "--concurrency=4", "-P", "-n"])
def test_options_the_supervisor_sets_itself_are_refused(option):
    with pytest.raises(CommandError, match=f"{option.split('=')[0]} is set for every child"):
        call_command("worker", "--processes", "1", option, "x")


def _run(prompt: str) -> Conversation:
    from orchestration import services

    return services.conversation_create(owner=None, model="scripted", prompt=prompt)


def _is_sleep(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"sleep")
    except OSError:
        return False
