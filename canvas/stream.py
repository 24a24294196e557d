"""The stream as a person reads it: each tool call one card with its result inside.

Pure. `stream_rows` takes the page's rows in log order and folds each result into its call's
row (`row.result`); the result keeps its own row as a hidden marker, so every seq is still a
direct child of `#events` (the page's resume protocol counts them, canvas/static/.../
conversation.js). Over the socket the same happens in the browser: a result's frame appends the
marker and swaps the result into `#call-log-{key}` out of band (`#result-frame`).

An approval reads as one row, its decision: the status changes around it and the approved
call's start are quiet rows (hidden; `EventRow.quiet`), and the call's card says it runs.

It also puts a run's stops in words: a pause or interrupt while calls were in flight says
which ("Paused by ana while `sleep 3` ran; its result follows"), and a result that arrives
after such a stop shows a line where it arrived, pointing to its card.
"""

from __future__ import annotations

from dataclasses import replace

from conversations.events import (
    ActionDecisionEvent,
    ActionEvent,
    Decision,
    Status,
    StatusChangeEvent,
)

from .event_rows import EventRow


def call_words(row: EventRow) -> str:
    """A call in a few words: an external agent's title for it, its command's first line, the
    file edit, or the tool's name."""
    if isinstance(row.event, ActionEvent) and row.event.title:
        return f"“{row.event.title}”"
    if row.command is not None:
        lines = row.command.strip().splitlines()
        return f"`{lines[0] if lines else ''}`" + (" …" if len(lines) > 1 else "")
    if row.edit is not None and row.edit.path:
        return f"{row.edit.operation} `{row.edit.path}`".strip()
    return f"the {row.event.tool} call" if isinstance(row.event, ActionEvent) else "a call"


def stop_note(status: StatusChangeEvent, in_flight: list[EventRow]) -> str:
    """What a pause or interrupt left running, in words; "" when nothing was in flight."""
    if status.status != Status.PAUSED or not in_flight or not status.reason:
        return ""
    calls = ", ".join(call_words(r) for r in in_flight)
    whose = "its result follows" if len(in_flight) == 1 else "their results follow"
    return f"{status.reason[:1].upper()}{status.reason[1:]} while {calls} ran; {whose}."


def stream_rows(rows: list[EventRow]) -> list[EventRow]:
    """The rows with results folded into their calls, and stops and late results in words."""
    out: list[EventRow] = []
    open_calls: dict[str, int] = {}
    """call_key -> index in `out` of a call still waiting for its result."""
    late: set[str] = set()
    """Calls that were in flight when the run stopped."""
    held: dict[str, int] = {}
    """A held call's action id -> its index in `out`, for its decision."""
    for row in rows:
        if row.kind == "tool-call":
            open_calls[row.call_key] = len(out)
            if isinstance(row.event, ActionEvent) and row.event.requires_confirmation:
                held[row.event.id] = len(out)
            out.append(row)
        elif isinstance(row.event, ActionDecisionEvent) and row.event.action_id in held:
            index = held.pop(row.event.action_id)
            out[index] = replace(out[index], decision=str(row.event.decision))
            out.append(row)
        elif row.kind == "tool-result" and row.call_key in open_calls:
            index = open_calls.pop(row.call_key)
            call = out[index]
            note = ""
            if row.call_key in late:
                note = f"The result of {call_words(call)} arrived: it is in the card above."
            out.append(replace(row, in_card=True, call_seq=call.seq, note=note))
            out[index] = replace(call, result=out[-1])
        elif row.kind == "tool-started" and row.call_key in open_calls:
            index = open_calls[row.call_key]
            out[index] = replace(out[index], running=True)
            out.append(row)
        elif row.kind == "status-changed" and isinstance(row.event, StatusChangeEvent):
            in_flight = [out[i] for i in open_calls.values() if not _held(out[i])]
            note = stop_note(row.event, in_flight)
            if note:
                late |= {r.call_key for r in in_flight}
            out.append(replace(row, note=note))
        else:
            out.append(row)
    return out


def _held(row: EventRow) -> bool:
    """A call waiting for a person's decision is not running (until it is approved)."""
    return (
        isinstance(row.event, ActionEvent)
        and row.event.requires_confirmation
        and not row.running
        and row.decision != Decision.APPROVED
    )


def calls_in_flight(rows: list[EventRow]) -> list[EventRow]:
    """The calls among `rows` (in log order) still running at the end of them: no result yet,
    not held for a decision."""
    shown = stream_rows(rows)
    return [r for r in shown if r.kind == "tool-call" and r.result is None and not _held(r)]


def live_row(row: EventRow, late_calls: set[str]) -> EventRow:
    """A row for the socket: a result goes into its call's card (its call is on the page, which
    shows the whole log), with a line where it arrived when its run stopped while it ran."""
    if row.kind != "tool-result":
        return row
    note = (
        "The result arrived: it is in its call's card above." if row.call_key in late_calls else ""
    )
    return replace(row, in_card=True, note=note)
