"""What every fault case asserts: the log is whole (gap-free seqs, one result per call), no
two commands overlapped (start/end markers in a workspace side file), no command outlived
its runner (no process carries the case's marker), and the run continued within a target."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from conversations import store
from conversations.models import Conversation, ConversationEvent
from tests.conftest import wait_for

SIDE_FILE = "side.log"


def marked_command(marker: str, name: str, seconds: float) -> str:
    """A terminal command that brackets its work with start/end lines in the side file; its
    sleep carries `marker` as its process name (`exec -a`), which /proc shows."""
    return (
        f"echo 'start {name}' >> {SIDE_FILE}; (exec -a {marker}-{name} sleep {seconds}); "
        f"echo 'end {name}' >> {SIDE_FILE}"
    )


def status_of(conversation) -> str:
    return Conversation.objects.get(pk=conversation.pk).status


def side_lines(conversation) -> list[str]:
    """The start/end lines the run's marked commands wrote so far."""
    return _side_lines(Path(conversation.workspace_path))


def _side_lines(workspace: Path) -> list[str]:
    side = workspace / SIDE_FILE
    return side.read_text().splitlines() if side.exists() else []


def wait_started(conversation, name: str, timeout: float = 60) -> None:
    """Until the marked command `name` has written its start line."""
    wait_for(
        lambda: f"start {name}" in side_lines(conversation), timeout, message=f"{name} to start"
    )


def assert_log_whole(conversation_id) -> list:
    events = [s.event for s in store.load(conversation_id)]
    seqs = list(
        ConversationEvent.objects.filter(conversation_id=conversation_id)
        .order_by("seq")
        .values_list("seq", flat=True)
    )
    assert seqs == list(range(1, len(seqs) + 1)), f"seqs have gaps or repeats: {seqs}"
    calls = [e.tool_call_id for e in events if e.type == "tool.call"]
    results = [e.tool_call_id for e in events if e.type == "tool.result"]
    assert sorted(calls) == sorted(results), f"calls {calls} vs results {results}:\n" + "\n".join(
        f"{seq} {e.type} {getattr(e, 'tool_call_id', '')} {str(getattr(e, 'content', ''))[:60]!r}"
        for seq, e in zip(seqs, events, strict=False)
    )
    assert len(set(calls)) == len(calls), "a tool call id repeats"
    return events


def assert_no_overlap(workspace: Path) -> list[str]:
    """Each `end X` follows `start X` with no other start between: a command killed with its
    runner has no end; one that ran on past its runner ends after the next one started."""
    lines = _side_lines(workspace)
    running: str | None = None
    for line in lines:
        kind, name = line.split(" ", 1)
        if kind == "start":
            running = name
        else:
            assert running == name, f"{name} ended while {running} ran: {lines}"
            running = None
    return lines


def marked_pids(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


def assert_nothing_running(marker: str) -> None:
    """Within a second (a kill takes a moment to land), no process carries `marker`."""
    with contextlib.suppress(AssertionError):
        wait_for(lambda: not marked_pids(marker), 1.0, 0.05)
    left = marked_pids(marker)
    assert not left, f"commands outlived their runner: {_describe(left)}"


def kill_marked(marker: str) -> None:
    """Cleanup after a failed case: the processes this case's commands started."""
    for pid in marked_pids(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _describe(pids: list[int]) -> str:
    out = []
    for pid in pids:
        with contextlib.suppress(OSError):
            out.append(f"{pid}: {Path(f'/proc/{pid}/cmdline').read_bytes()!r}")
    return "; ".join(out)


def last_seq(conversation_id) -> int:
    return (
        ConversationEvent.objects.filter(conversation_id=conversation_id)
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
        or 0
    )


@dataclass
class Fault:
    """When a fault hit, to measure how long the run took to continue."""

    conversation_id: object
    at: float
    seq: int

    @classmethod
    def now(cls, conversation_id) -> Fault:
        return cls(conversation_id, time.time(), last_seq(conversation_id))

    def recovery(self, timeout: float = 120) -> float:
        """Seconds from the fault to the first event after it: the run continued."""
        wait_for(lambda: last_seq(self.conversation_id) > self.seq, timeout, 0.05,
                 "the run to continue after the fault")  # fmt: skip
        first = ConversationEvent.objects.get(
            conversation_id=self.conversation_id, seq=self.seq + 1
        )
        return first.created_at.timestamp() - self.at

    def longest_stall(self) -> float:
        """The longest pause in the log from the fault on: how long the run stood still."""
        stamps = [
            t.timestamp()
            for t in ConversationEvent.objects.filter(
                conversation_id=self.conversation_id, seq__gt=self.seq
            )
            .order_by("seq")
            .values_list("created_at", flat=True)
        ]
        points = [self.at, *stamps]
        return max(b - a for a, b in zip(points, points[1:], strict=False)) if stamps else 0.0
