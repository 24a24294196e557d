"""What one event row on the conversation page needs: the event plus a few derived fields.

Pure (no ORM, no templates): the detail view builds rows from stored events, the page consumer
from records off the channel layer, and both render the same partial
(`canvas/conversation_detail.html#event-row`). Approval cards (`#approval-card`) are built here
too, from the approvals selector's pending actions. Nothing here marks text safe; the templates
escape everything.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from conversations.events import (
    KNOWN_TYPES,
    AcpStateEvent,
    ActionEvent,
    ActionStartedEvent,
    AnyEvent,
    ObservationEvent,
    PermissionChoice,
    RunFinishedEvent,
    Status,
    StatusChangeEvent,
    UnknownEvent,
    ValidationError,
    event_from_payload,
)
from orchestration.control.risk import rule_explanation

from .file_edits import FILE_EDITOR, DiffLine, FileEdit, file_edit, text_of, unified_diff
from .tool_output import ToolOutput, clip_output

if TYPE_CHECKING:
    from orchestration.control.approvals import PendingAction

_PARTIAL_KINDS = {t: t.replace(".", "-") for t in KNOWN_TYPES}


@dataclass(frozen=True, slots=True)
class Argument:
    name: str
    value: str
    block: bool
    """Long or multi-line: shown as a block rather than inline."""


@dataclass(frozen=True, slots=True)
class DiffView:
    """One file an external agent's tool call changed, as a unified diff."""

    path: str
    lines: list[DiffLine]
    hidden_lines: int = 0
    """Lines past file_edits.MAX_DIFF_LINES, not shown."""
    new_file: bool = False


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
    rules: list[RuleNote] = field(default_factory=list)
    """The analyzer rules a tool call tripped, with their explanations."""
    call_key: str = ""
    """A tool call's or result's tool_call_id as a DOM-safe key (canvas.stream.call_key)."""
    edit: FileEdit | None = None
    """A file_editor call's change, shown as a diff."""
    output: ToolOutput | None = None
    """A tool result's output, long ones clipped to head and tail."""
    result: EventRow | None = None
    """A tool call's result, once it is in the log (set by canvas.stream.stream_rows)."""
    in_card: bool = False
    """A result shown inside its call's card: its own row is only a marker."""
    call_seq: int | None = None
    """A result's call's seq, when the call is on the page."""
    note: str = ""
    """Words the stream adds: what was in flight when a run paused, why a result is late."""
    diffs: list[DiffView] = field(default_factory=list)
    hidden_diffs: int = 0
    """Files changed past MAX_DIFF_FILES, not drawn."""
    """An external agent's file changes reported with a tool result."""
    context_label: str = ""
    """An acp.state's context use in a few characters: "12k/200k"."""
    answer: str | None = None
    """A `finish` call's message: the run's final answer, shown once as Markdown."""
    echo: bool = False
    """A `finish` call's result: the answer again, so not shown under it."""
    quiet: bool = False
    """Said by a neighbouring row (an approval's status changes, the approved call's start):
    kept in #events, hidden, so every seq is still there."""
    running: bool = False
    """A held call that was approved and has started (set by canvas.stream.stream_rows)."""
    decision: str | None = None
    """A held call's decision ("approved", "rejected") once it is in the log (stream_rows): an
    external agent's approved call runs with no start event of ours, so the card says
    "approved" from the decision, after a reload as live."""


@dataclass(frozen=True, slots=True)
class RuleNote:
    id: str
    explanation: str


def rule_notes(rule_ids: list[str]) -> list[RuleNote]:
    """Rule ids with the analyzer's one-line reasons ("" for a rule this code does not know)."""
    return [RuleNote(rule_id, rule_explanation(rule_id)) for rule_id in rule_ids]


def status_label(status: str) -> str:
    """A status in sentence case: "Waiting for confirmation"."""
    try:
        words = Status(status).name.replace("_", " ")
    except ValueError:
        words = str(status).replace("_", " ")
    return words.capitalize()


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def _arguments(action: ActionEvent) -> tuple[dict[str, Any] | None, list[Argument]]:
    parsed = action.parsed_arguments.as_object
    if parsed is None:
        return None, []
    arguments = []
    for name, value in parsed.items():
        text = value if isinstance(value, str) else _pretty(value)
        arguments.append(Argument(name, text, block="\n" in text or len(text) > 80))
    return parsed, arguments


def tokens_short(count: int) -> str:
    """A token count for a small row: 950, 12k, 1.2M."""
    if count < 1000:
        return str(count)
    if count < 10_000:
        return f"{count / 1000:.1f}".removesuffix(".0") + "k"
    if count < 1_000_000:
        return f"{count // 1000}k"
    return f"{count / 1_000_000:.1f}".removesuffix(".0") + "M"


def _context_label(event: AcpStateEvent) -> str:
    used, size = event.context_used, event.context_size
    if used is None:
        return ""
    return tokens_short(used) + (f"/{tokens_short(size)}" if size else "")


MAX_DIFF_FILES = 20
"""Files of one tool result drawn as diffs; each costs a difflib run on every render."""


def diff_views(event: ObservationEvent) -> list[DiffView]:
    views = []
    for diff in event.diffs[:MAX_DIFF_FILES]:
        lines, hidden = unified_diff(diff.old_text, diff.new_text)
        views.append(DiffView(diff.path, lines, hidden, new_file=diff.old_text is None))
    return views


def call_key(tool_call_id: str) -> str:
    """A tool_call_id as a DOM id part: provider ids are usually [A-Za-z0-9_-], but a model's
    id is not trusted, so anything else is hashed."""
    if re.fullmatch(r"[A-Za-z0-9_-]{1,80}", tool_call_id):
        return f"c-{tool_call_id}"
    return "h-" + hashlib.sha256(tool_call_id.encode()).hexdigest()[:24]


FINISH = "finish"


def _quiet_status(event: StatusChangeEvent) -> bool:
    """An approval's own status changes: the held call's card and the decision's row say it."""
    waiting = Status.WAITING_FOR_CONFIRMATION
    return event.status == waiting or (event.status == Status.RUNNING and event.previous == waiting)


def event_row(seq: int, event: AnyEvent) -> EventRow:
    if isinstance(event, ObservationEvent):
        return EventRow(
            seq=seq,
            event=event,
            kind="tool-result",
            call_key=call_key(event.tool_call_id),
            output=clip_output(event.content),
            diffs=diff_views(event),
            hidden_diffs=max(len(event.diffs) - MAX_DIFF_FILES, 0),
            echo=event.tool == FINISH and not event.is_error,
        )
    if isinstance(event, UnknownEvent):
        return EventRow(seq=seq, event=event, kind="unknown", details=_pretty(event.payload))
    kind = _PARTIAL_KINDS.get(event.type, "unknown")
    if isinstance(event, ActionEvent):
        parsed, arguments = _arguments(event)
        command = None
        if (
            parsed is not None
            and event.tool == "terminal"
            and isinstance(parsed.get("command"), str)
        ):
            command = parsed["command"]
            arguments = [a for a in arguments if a.name != "command"]
        edit = None
        if parsed is not None and event.tool == FILE_EDITOR:
            edit = file_edit(parsed)
            arguments = [a for a in arguments if a.name not in edit.shown]
        if event.security_risk is not None:  # shown by the risk badge instead
            arguments = [a for a in arguments if a.name != "security_risk"]
        answer = None
        if parsed is not None and event.tool == FINISH and isinstance(parsed.get("message"), str):
            answer = parsed["message"]
            arguments = [a for a in arguments if a.name != "message"]
        return EventRow(
            seq=seq,
            event=event,
            kind=kind,
            command=command,
            arguments=arguments,
            raw_arguments=event.arguments if parsed is None else None,
            rules=rule_notes(event.risk_rules),
            call_key=call_key(event.tool_call_id),
            edit=edit,
            answer=answer,
        )
    if isinstance(event, StatusChangeEvent):
        return EventRow(
            seq=seq, event=event, kind=kind, status_label=status_label(event.status),
            quiet=_quiet_status(event),
        )  # fmt: skip
    if isinstance(event, RunFinishedEvent):
        return EventRow(seq=seq, event=event, kind=kind, status_label=status_label(event.status))
    if isinstance(event, ActionStartedEvent):
        # The call's card says it runs; the decision's row said who let it.
        return EventRow(seq=seq, event=event, kind=kind, call_key=call_key(event.tool_call_id),
                        quiet=True)  # fmt: skip
    if isinstance(event, AcpStateEvent):
        return EventRow(seq=seq, event=event, kind=kind, context_label=_context_label(event))
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


# ---- Approval cards -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ApprovalCard:
    """One held action as the approval card shows it."""

    action_id: str
    seq: int
    tool: str
    risk: str
    """LOW, MEDIUM or HIGH; "" when unknown."""
    rules: list[RuleNote]
    thought: str
    model_risk: str = ""
    """The model's own estimate, when it gave one (a security_risk argument)."""
    command: str | None = None
    """A terminal command."""
    operation: str = ""
    """A file_editor command (create, str_replace, insert, ...)."""
    path: str = ""
    diff: list[DiffLine] = field(default_factory=list)
    """str_replace: old lines against new; insert: the inserted lines."""
    insert_line: int | None = None
    file_text: str | None = None
    """create: the whole new file."""
    arguments: list[Argument] = field(default_factory=list)
    """Whatever the views above do not show."""
    raw_arguments: str | None = None
    title: str = ""
    """An external agent's own words for the call; shown instead of the tool's name."""
    kind: str | None = None
    """An external agent's tool kind (read, edit, execute, ...)."""
    locations: list[str] = field(default_factory=list)
    options: list[PermissionChoice] = field(default_factory=list)
    """An external agent's own answers, one button each; empty: Approve and Reject."""

    @property
    def summary(self) -> str:
        """One line for lists: the agent's title, the command's first line, or the file
        operation and path."""
        if self.title:
            return self.title
        if self.command is not None:
            lines = self.command.strip().splitlines()
            first = lines[0] if lines else ""
            return first + (" …" if len(lines) > 1 else "")
        if self.operation or self.path:
            return f"{self.operation} {self.path}".strip()
        if self.raw_arguments is not None:
            return self.raw_arguments.strip().splitlines()[0] if self.raw_arguments.strip() else ""
        return ", ".join(f"{a.name}={a.value}" for a in self.arguments)[:200]


def approval_card(pending: PendingAction) -> ApprovalCard:
    """The card for one pending action: tool-specific views of its arguments, the rest as a
    list. Arguments that are not a JSON object are shown verbatim."""
    rules = [RuleNote(rule_id, explanation or "") for rule_id, explanation in pending.rules]
    common: dict[str, Any] = {
        "action_id": pending.action_id,
        "seq": pending.seq,
        "tool": pending.tool,
        "risk": (pending.risk or "").upper(),
        "rules": rules,
        "thought": pending.thought or "",
        "title": pending.title,
        "kind": pending.kind,
        "locations": list(pending.locations),
        "options": list(pending.options),
    }
    args = pending.arguments
    if not isinstance(args, Mapping):
        return ApprovalCard(**common, raw_arguments=str(args))
    model_risk = args.get("security_risk")
    common["model_risk"] = model_risk.upper() if isinstance(model_risk, str) else ""
    shown = {"security_risk"}
    if pending.tool == "terminal" and isinstance(args.get("command"), str):
        common["command"] = args["command"]
        shown.add("command")
    elif pending.tool == FILE_EDITOR:
        edit = file_edit(args)
        shown |= edit.shown
        common |= {
            "operation": edit.operation,
            "path": edit.path,
            "diff": edit.diff,
            "insert_line": edit.insert_line,
            "file_text": edit.file_text,
        }
    rest = [
        Argument(name, text, block="\n" in text or len(text) > 80)
        for name, value in args.items()
        if name not in shown
        for text in [text_of(value)]
    ]
    return ApprovalCard(**common, arguments=rest)
