"""What a parent's model reads when its children have ended. Pure: no ORM.

A child that did not finish (an error, stuck, out of budget, stopped by a person, deleted)
is reported as a failure with whatever partial answer it left, never as a success.
"""

from __future__ import annotations

from collections.abc import Sequence

from conversations.events import ChildResult, ObservationEvent, SubagentsSpawnedEvent


def _status_line(result: ChildResult) -> str:
    if result.succeeded:
        return "finished"
    return f"{result.status}" + (f" ({result.reason})" if result.reason else "")


def failure_text(result: ChildResult, *, what: str = "The sub-agent") -> str:
    text = f"{what} {result.name!r} did not finish: it ended {_status_line(result)}."
    if result.answer:
        text += f"\nIts partial answer:\n{result.answer}"
    return text


def task_observation(spawn: SubagentsSpawnedEvent, result: ChildResult) -> ObservationEvent:
    content = result.answer or "(the sub-agent finished without an answer)"
    return ObservationEvent(
        tool_call_id=spawn.tool_call_id,
        tool=spawn.tool,
        content=content if result.succeeded else failure_text(result),
        is_error=not result.succeeded,
    )


def delegate_observation(
    spawn: SubagentsSpawnedEvent, results: Sequence[ChildResult]
) -> ObservationEvent:
    failed = [r for r in results if not r.succeeded]
    parts = [
        f"{len(results) - len(failed)} of {len(results)} task"
        f"{'s' if len(results) != 1 else ''} finished."
    ]
    for result in results:
        parts.append(
            f"\n## {result.name} ({_status_line(result)})\n{result.answer or '(no answer)'}"
        )
    return ObservationEvent(
        tool_call_id=spawn.tool_call_id, tool=spawn.tool, content="\n".join(parts),
        is_error=bool(failed),
    )  # fmt: skip


def observation_for(
    spawn: SubagentsSpawnedEvent, results: Sequence[ChildResult]
) -> ObservationEvent | None:
    """The call's result once this round settled; None for a workflow, whose script runs
    again (by replay) to decide what comes next."""
    if spawn.tool == "task":
        return task_observation(spawn, results[0])
    if spawn.tool == "delegate":
        return delegate_observation(spawn, results)
    return None
