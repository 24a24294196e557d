"""What one event row on the conversation page needs: the event plus a few derived fields.

Pure (no ORM, no templates): the detail view builds rows from stored events, the page consumer
from records off the channel layer, and both render the same partial
(`canvas/conversation_detail.html#event-row`). Nothing here marks text safe; the templates
escape everything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from conversations.events import (
    KNOWN_TYPES,
    ActionEvent,
    AnyEvent,
    RunFinishedEvent,
    Status,
    StatusChangeEvent,
    UnknownEvent,
    ValidationError,
    event_from_payload,
)

_PARTIAL_KINDS = {t: t.replace(".", "-") for t in KNOWN_TYPES}


@dataclass(frozen=True, slots=True)
class Argument:
    name: str
    value: str
    block: bool
    """Long or multi-line: shown as a block rather than inline."""


@dataclass(frozen=True, slots=True)
class EventRow:
    seq: int
    event: AnyEvent
    kind: str
    """The event type as a CSS/partial-friendly slug; "unknown" for tags we do not know."""
    command: str | None = None
    """The shell command of a terminal call."""
    arguments: list[Argument] = field(default_factory=list)
    raw_arguments: str | None = None
    """Tool arguments that are not a JSON object, verbatim."""
    details: str = ""
    """Pretty JSON of an unknown event's fields."""
    status_label: str = ""
    """Human words for the status a status.changed or run.finished event names."""


def status_label(status: str) -> str:
    """The same words the Conversation model's choices use."""
    try:
        return Status(status).name.replace("_", " ").title()
    except ValueError:
        return str(status).replace("_", " ").title()


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def _arguments(raw: str) -> tuple[dict[str, Any] | None, list[Argument]]:
    try:
        parsed = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return None, []
    if not isinstance(parsed, dict):
        return None, []
    arguments = []
    for name, value in parsed.items():
        text = value if isinstance(value, str) else _pretty(value)
        arguments.append(Argument(name, text, block="\n" in text or len(text) > 80))
    return parsed, arguments


def event_row(seq: int, event: AnyEvent) -> EventRow:
    if isinstance(event, UnknownEvent):
        return EventRow(seq=seq, event=event, kind="unknown", details=_pretty(event.payload))
    kind = _PARTIAL_KINDS.get(event.type, "unknown")
    if isinstance(event, ActionEvent):
        parsed, arguments = _arguments(event.arguments)
        command = None
        if (
            parsed is not None
            and event.tool == "terminal"
            and isinstance(parsed.get("command"), str)
        ):
            command = parsed["command"]
            arguments = [a for a in arguments if a.name != "command"]
        return EventRow(
            seq=seq,
            event=event,
            kind=kind,
            command=command,
            arguments=arguments,
            raw_arguments=event.arguments if parsed is None else None,
        )
    if isinstance(event, StatusChangeEvent | RunFinishedEvent):
        return EventRow(seq=seq, event=event, kind=kind, status_label=status_label(event.status))
    return EventRow(seq=seq, event=event, kind=kind)


def event_row_from_record(record: dict[str, Any]) -> EventRow:
    """A row from an API-shaped record (`StoredEvent.as_record()`: the event's fields + seq)."""
    fields = {k: v for k, v in record.items() if k != "seq"}
    type_ = str(fields.get("type", ""))
    if type_ not in KNOWN_TYPES and set(fields) <= {"id", "type", "timestamp", "payload"}:
        # An UnknownEvent's record nests its fields under "payload"; unwrap them once.
        fields = {**fields, **(fields.pop("payload", None) or {})}
    try:
        event = event_from_payload(type_, fields)
    except ValidationError:  # written by a newer schema: show it generically
        event = UnknownEvent(type=type_ or "invalid", payload=fields)
    return event_row(int(record["seq"]), event)


def last_status(rows: list[EventRow], default: str) -> str:
    """The status as of the last row shown: what the header badge should say with these rows."""
    for row in reversed(rows):
        if isinstance(row.event, StatusChangeEvent):
            return row.event.status.value
    return default
