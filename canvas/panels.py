"""The side panel's tabs: a small registry, so later work adds its own (the agent tree, a plan).

A tab is a name (its URL segment), a label, the template partial it renders and a context
function given the conversation and the request. The page shows the tabs in registration order
and loads the first; `canvas.panel_views` renders any of them on request, after canvas.access
granted VIEW. Each context reads what it needs itself: the workspace (canvas.workspace_reads)
or the log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest

from common.errors import ServiceError
from conversations import store
from conversations.events import ActionEvent, ObservationEvent
from conversations.models import Conversation

from . import workspace_reads
from .highlight import highlighted

TEMPLATE = "canvas/panels.html"
TERMINAL_TOOL = "terminal"
MAX_CONSOLE_COMMANDS = 200
"""The Terminal tab shows the latest commands; older ones stay in the stream."""

PanelContext = Callable[[Conversation, HttpRequest], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Panel:
    name: str
    label: str
    template: str
    """A template (or `template#partial`) rendered with the context plus `conversation_id`."""
    context: PanelContext


PANELS: dict[str, Panel] = {}


def panel_register(panel: Panel) -> Panel:
    if panel.name in PANELS:
        raise ValueError(f"a panel named {panel.name!r} is registered already")
    PANELS[panel.name] = panel
    return panel


def panel_list() -> list[Panel]:
    return list(PANELS.values())


def panel_get(name: str) -> Panel | None:
    return PANELS.get(name)


def _refusal(exc: ServiceError) -> dict[str, Any]:
    return {"refusal": exc.detail}


def changes_context(conversation: Conversation, request: HttpRequest) -> dict[str, Any]:
    try:
        return {"changes": workspace_reads.changes(conversation)}
    except ServiceError as exc:
        return _refusal(exc)


@dataclass(frozen=True, slots=True)
class DiffLine:
    kind: str
    """add, del, hunk, meta or ctx: a CSS class."""
    text: str


def diff_lines(text: str) -> list[DiffLine]:
    lines = []
    for line in text.splitlines():
        if line.startswith(("+++", "---", "diff --git", "index ", "new file", "deleted file")):
            kind = "meta"
        elif line.startswith("@@"):
            kind = "hunk"
        else:
            kind = {"+": "add", "-": "del"}.get(line[:1], "ctx")
        lines.append(DiffLine(kind, line))
    return lines


def files_context(conversation: Conversation, request: HttpRequest) -> dict[str, Any]:
    path = request.GET.get("path", "")
    try:
        found = workspace_reads.files_at(conversation, path)
    except ServiceError as exc:
        return _refusal(exc) | {"path": path}
    context: dict[str, Any] = {"found": found, "crumbs": _crumbs(found.path)}
    if found.file is not None and found.file.text is not None:
        context["code"] = highlighted(found.file.path, found.file.text)
    return context


def _crumbs(path: str) -> list[tuple[str, str]]:
    """(name, path) of each folder from the root down to `path`."""
    parts = [p for p in path.split("/") if p]
    return [(name, "/".join(parts[: i + 1])) for i, name in enumerate(parts)]


@dataclass(frozen=True, slots=True)
class ConsoleEntry:
    seq: int
    command: str
    output: str | None
    """None while the command runs."""
    exit_code: int | None
    note: str = ""
    """Interrupted, timed out or refused: said in words."""


def console_entries(events: Iterable[Any], limit: int = MAX_CONSOLE_COMMANDS) -> list[ConsoleEntry]:
    """The terminal tool's commands and what they printed, in the order they were asked for."""
    calls: dict[str, ConsoleEntry] = {}
    for stored in events:
        event = stored.event
        if isinstance(event, ActionEvent) and event.tool == TERMINAL_TOOL:
            arguments = event.parsed_arguments.as_object or {}
            command = arguments.get("command")
            text = command if isinstance(command, str) else event.arguments
            calls[event.tool_call_id] = ConsoleEntry(stored.seq, text, None, None)
        elif isinstance(event, ObservationEvent) and event.tool_call_id in calls:
            entry = calls[event.tool_call_id]
            output = _without_exit_footer(event.content, event.exit_code)
            calls[event.tool_call_id] = ConsoleEntry(
                entry.seq, entry.command, output, event.exit_code, _note(event)
            )
    return sorted(calls.values(), key=lambda e: e.seq)[-limit:]


def _without_exit_footer(content: str, exit_code: int | None) -> str:
    """The output without the terminal tool's "[exit code: N]" line (written for the model):
    the console says a failing exit once, in its own note, and a zero exit not at all."""
    footer = f"[exit code: {exit_code}]"
    return content.removesuffix(footer) if exit_code is not None else content


def _note(event: ObservationEvent) -> str:
    if event.rejected:
        return f"not run: rejected by {event.rejection_source or 'user'}"
    if event.interrupted:
        return "interrupted"
    return ""


def terminal_context(conversation: Conversation, request: HttpRequest) -> dict[str, Any]:
    return {"console": console_entries(store.load(conversation.pk))}


panel_register(Panel("changes", "Changes", f"{TEMPLATE}#panel-changes", changes_context))
panel_register(Panel("files", "Files", f"{TEMPLATE}#panel-files", files_context))
panel_register(Panel("terminal", "Terminal", f"{TEMPLATE}#panel-terminal", terminal_context))
