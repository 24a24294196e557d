"""ACP `session/update` notifications as our typed events.

A `Translator` is fed the SDK's update models in arrival order during one turn and returns the
events to append now; what streams (message and thought text, a tool call's progress) is
also handed to `live` as it arrives, redacted chunk by chunk, and persisted only whole:
- message and thought chunks aggregate into one AgentMessageEvent / AgentThoughtEvent per
  message id (or per run of chunks, for agents that send no ids), written when the message
  ends: another message starts, anything else arrives, or the turn ends;
- a tool call becomes one ActionEvent, written once it does more than wait (it runs, it ends,
  or the agent asks permission for it), and one ObservationEvent when it completes or fails,
  with its text, its diffs and its terminal's output; calls still open when the turn ends are
  closed as failed. What a permission request showed (Codex: the reason, "Proposed
  Amendment", "Available Decisions") describes the request, not the call's output: when no
  later update replaced it, the result's text is the command's output from `rawOutput`;
- plans, modes, slash commands and context use become PlanEvent / AcpStateEvent.
Pure: no ORM, no I/O beyond the callbacks it is given.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from acp import schema

from conversations.events import (
    AcpCommand,
    AcpStateEvent,
    ActionEvent,
    AgentMessageEvent,
    AgentThoughtEvent,
    BaseEvent,
    FileDiff,
    ObservationEvent,
    PermissionChoice,
    PlanEvent,
    PlanItem,
    Usage,
)
from conversations.redaction import Redactor, StreamRedactor

LiveCallback = Callable[[str, str, str, str], None]
"""(kind "message" | "thought" | "tool", key, text, title): live text, already redacted."""
TerminalReader = Callable[[str], str | None]
"""A terminal id's output so far (None: not one of ours)."""

MAX_ARGUMENTS_CHARS = 100_000
MAX_OUTPUT_CHARS = 200_000
"""An observation keeps the tail of a tool call's text beyond this (the head is dropped)."""
ENDED = frozenset({"completed", "failed"})


@dataclass
class _Stream:
    kind: str
    key: str
    parts: list[str] = field(default_factory=list)
    redactor: StreamRedactor | None = None


@dataclass
class _ToolCall:
    tool_call_id: str
    title: str = ""
    kind: str | None = None
    status: str | None = None
    content: list[Any] = field(default_factory=list)
    locations: list[str] = field(default_factory=list)
    raw_input: Any = None
    raw_output: Any = None
    written: bool = False
    answered: bool = False
    shown: str = ""
    """Progress text already sent live (what a next update adds is sent, not all again)."""
    asked: bool = False
    """`content` is still what a permission request showed, not anything the call produced."""

    def merge(self, update: schema.ToolCallStart | schema.ToolCallProgress) -> None:
        for name in ("title", "kind", "status", "raw_input", "raw_output"):
            value = getattr(update, name, None)
            if value is not None:
                setattr(self, name, value)
        if update.content is not None:
            self.content = list(update.content)
            self.asked = False
        if update.locations is not None:
            self.locations = [
                loc.path if loc.line is None else f"{loc.path}:{loc.line}"
                for loc in update.locations
            ]


class Translator:
    def __init__(
        self,
        *,
        redactor: Redactor | None = None,
        live: LiveCallback | None = None,
        terminal_output: TerminalReader | None = None,
    ) -> None:
        self._redactor = redactor
        self._live = live
        self._terminal_output = terminal_output or (lambda _id: None)
        self._stream: _Stream | None = None
        self._calls: dict[str, _ToolCall] = {}
        self._anonymous = 0
        self._permissions = 0
        self.cost_usd = 0.0
        """The agent's own running cost figure for the session (usage_update), in USD."""

    # -- updates -----------------------------------------------------------------------------

    def feed(self, update: Any) -> list[BaseEvent]:
        """The events `update` completes, in order (often none: a chunk only streams)."""
        if isinstance(update, schema.AgentMessageChunk | schema.AgentThoughtChunk):
            kind = "message" if isinstance(update, schema.AgentMessageChunk) else "thought"
            return self._chunk(kind, update.message_id, _text_of(update.content))
        events = self._end_stream()
        if isinstance(update, schema.ToolCallStart | schema.ToolCallProgress):
            events += self._tool_call(update)
        elif isinstance(update, schema.AgentPlanUpdate):
            events.append(PlanEvent(entries=[_plan_item(entry) for entry in update.entries]))
        elif isinstance(update, schema.CurrentModeUpdate):
            events.append(AcpStateEvent(mode=update.current_mode_id))
        elif isinstance(update, schema.AvailableCommandsUpdate):
            commands = [
                AcpCommand(name=c.name, description=c.description or "")
                for c in update.available_commands
            ]
            events.append(AcpStateEvent(commands=commands))
        elif isinstance(update, schema.UsageUpdate):
            if update.cost is not None and update.cost.currency.upper() == "USD":
                self.cost_usd = max(self.cost_usd, float(update.cost.amount))
            events.append(AcpStateEvent(context_used=update.used, context_size=update.size))
        # user_message_chunk (a replay), session_info_update, config_option_update and kinds
        # this SDK adds later carry nothing the log needs.
        return events

    def permission(
        self, tool_call: schema.ToolCallUpdate, options: list[schema.PermissionOption]
    ) -> list[BaseEvent]:
        """The events before a permission request is asked: the message in flight, then the
        held action (last). A call already written (it ran, then asked again) gets a held
        action of its own."""
        return [*self._end_stream(), self._held(tool_call, options)]

    def _held(
        self, tool_call: schema.ToolCallUpdate, options: list[schema.PermissionOption]
    ) -> ActionEvent:
        call = self._calls.get(tool_call.tool_call_id)
        if call is None:
            call = self._calls[tool_call.tool_call_id] = _ToolCall(tool_call.tool_call_id)
        call.merge(tool_call)
        call.asked = call.asked or tool_call.content is not None
        choices = [
            PermissionChoice(option_id=o.option_id, name=o.name, kind=str(o.kind)) for o in options
        ]
        if call.written:
            self._permissions += 1
            held = _ToolCall(**{**call.__dict__, "written": False})
            held.tool_call_id = f"{call.tool_call_id}:permission-{self._permissions}"
            return self._action(held, options=choices)
        call.written = True
        return self._action(call, options=choices)

    def answered(self, tool_call_id: str) -> None:
        """A decision already gave this call its observation (a rejection)."""
        call = self._calls.get(tool_call_id)
        if call is not None:
            call.answered = True

    def finish(self, *, reason: str) -> list[BaseEvent]:
        """End of turn: the message in flight, and every open tool call closed as failed
        (its action first, if it never got one), `reason` saying why."""
        events = self._end_stream()
        for call in self._calls.values():
            if call.answered:
                continue
            if not call.written:
                call.written = True
                events.append(self._action(call))
            call.status = "failed"
            events.append(self._observation(call, note=reason))
        self._calls.clear()
        return events

    # -- messages ----------------------------------------------------------------------------

    def _chunk(self, kind: str, message_id: str | None, text: str) -> list[BaseEvent]:
        stream = self._stream
        events: list[BaseEvent] = []
        same = (
            stream is not None
            and stream.kind == kind
            and (message_id is None or message_id == stream.key)
        )
        if not same:
            events = self._end_stream()
            if message_id is None:
                self._anonymous += 1
                message_id = f"acp-{kind}-{id(self):x}-{self._anonymous}"
            stream = self._stream = _Stream(
                kind,
                message_id,
                redactor=StreamRedactor(self._redactor) if self._redactor else None,
            )
        assert stream is not None
        stream.parts.append(text)
        shown = stream.redactor.feed(text) if stream.redactor is not None else text
        if shown:
            self._send(kind, stream.key, shown)
        return events

    def _end_stream(self) -> list[BaseEvent]:
        stream, self._stream = self._stream, None
        if stream is None:
            return []
        if stream.redactor is not None:
            rest = stream.redactor.flush()
            if rest:
                self._send(stream.kind, stream.key, rest)
        text = "".join(stream.parts)
        if not text:
            return []
        if stream.kind == "thought":
            return [AgentThoughtEvent(text=text, message_id=stream.key)]
        return [AgentMessageEvent(text=text, llm_response_id=stream.key)]

    def _send(self, kind: str, key: str, text: str, title: str = "") -> None:
        if self._live is not None:
            self._live(kind, key, text, title)

    # -- tool calls --------------------------------------------------------------------------

    def _tool_call(self, update: schema.ToolCallStart | schema.ToolCallProgress) -> list[BaseEvent]:
        call = self._calls.get(update.tool_call_id)
        if call is None:
            call = self._calls[update.tool_call_id] = _ToolCall(update.tool_call_id)
        call.merge(update)
        events: list[BaseEvent] = []
        if not call.written and (call.status in ENDED or call.status == "in_progress"):
            call.written = True
            events.append(self._action(call))
        if call.status in ENDED:
            del self._calls[call.tool_call_id]
            if not call.answered:
                events.append(self._observation(call))
            return events
        progress = self._progress_text(call)
        if progress.startswith(call.shown) and len(progress) > len(call.shown):
            self._send("tool", call.tool_call_id, progress[len(call.shown) :], call.title)
        elif progress != call.shown or not call.shown:
            self._send("tool", call.tool_call_id, progress, call.title)
        call.shown = progress
        return events

    def _action(self, call: _ToolCall, *, options: list[PermissionChoice] = ()) -> ActionEvent:
        arguments = json.dumps(_input_of(call.raw_input), default=str)
        return ActionEvent(
            tool_call_id=call.tool_call_id,
            tool=str(call.kind or "other"),
            arguments=arguments[:MAX_ARGUMENTS_CHARS],
            title=call.title,
            kind=str(call.kind) if call.kind else None,
            locations=call.locations,
            requires_confirmation=bool(options),
            options=list(options),
        )

    def _observation(self, call: _ToolCall, *, note: str = "") -> ObservationEvent:
        text = self._progress_text(call, results_only=True)
        if not text and call.raw_output is not None:
            text = _output_of(call.raw_output)
        if note:
            text = f"{text}\n{note}" if text else note
        if len(text) > MAX_OUTPUT_CHARS:
            text = (
                f"[first {len(text) - MAX_OUTPUT_CHARS} characters cut]\n"
                + text[-MAX_OUTPUT_CHARS:]
            )
        diffs = [
            FileDiff(path=c.path, old_text=c.old_text, new_text=c.new_text)
            for c in call.content
            if isinstance(c, schema.FileEditToolCallContent)
        ]
        return ObservationEvent(
            tool_call_id=call.tool_call_id,
            tool=str(call.kind or "other"),
            content=text or call.status or "",
            is_error=call.status == "failed",
            diffs=diffs,
        )

    def _progress_text(self, call: _ToolCall, *, results_only: bool = False) -> str:
        """The call's content as text; `results_only`: without what a permission request
        showed (its diffs stay: they are what the call changes)."""
        parts = []
        for item in call.content:
            if isinstance(item, schema.ContentToolCallContent):
                if not (results_only and call.asked):
                    parts.append(_text_of(item.content))
            elif isinstance(item, schema.TerminalToolCallContent):
                output = self._terminal_output(item.terminal_id)
                if output:
                    parts.append(output)
            elif isinstance(item, schema.FileEditToolCallContent):
                parts.append(f"edited {item.path}")
        return "\n".join(part for part in parts if part)


def _text_of(block: Any) -> str:
    """A content block as text: its text, or what it points at."""
    text = getattr(block, "text", None)
    if isinstance(text, str):
        return text
    resource = getattr(block, "resource", None)
    if resource is not None:
        inner = getattr(resource, "text", None)
        return inner if isinstance(inner, str) else f"[{getattr(resource, 'uri', 'resource')}]"
    uri = getattr(block, "uri", None)
    if uri:
        return f"[{getattr(block, 'name', None) or uri}]({uri})"
    kind = getattr(block, "type", "content")
    return f"[{kind}]"


def _input_of(raw: Any) -> Any:
    """A tool call's rawInput as the action's arguments: an object, also when an agent sends
    it as JSON text (Gemini's "{}"); {} when there is none."""
    if raw is None:
        return {}
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return raw
        return parsed if isinstance(parsed, dict) else raw
    return raw


OUTPUT_KEYS = ("aggregated_output", "formatted_output", "output")
"""Where an agent's rawOutput keeps a command's output (Codex's ExecCommandEnd: stdout and
stderr interleaved, then as the model saw it); `stdout` / `stderr` when none is there."""
STREAM_KEYS = (*OUTPUT_KEYS, "stdout", "stderr")


def _output_of(raw: Any) -> str:
    """A tool call's rawOutput as its result text: the command's output when it is an object
    holding one (with a nonzero exit code noted), else the text or JSON."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict) and any(isinstance(raw.get(k), str) for k in STREAM_KEYS):
        text = next((raw[k] for k in OUTPUT_KEYS if isinstance(raw.get(k), str) and raw[k]), "")
        if not text:
            streams = [raw.get("stdout"), raw.get("stderr")]
            text = "\n".join(s for s in streams if isinstance(s, str) and s)
        code = raw.get("exit_code")
        if isinstance(code, int) and code != 0:
            text = f"{text.rstrip()}\n(exit code {code})".lstrip("\n")
        return text
    return json.dumps(raw, default=str)


def _plan_item(entry: schema.PlanEntry) -> PlanItem:
    return PlanItem(content=entry.content, priority=str(entry.priority), status=str(entry.status))


def turn_usage(response: schema.PromptResponse | None, cost_usd: float) -> Usage | None:
    """What a turn cost: the token counts of its prompt response, `cost_usd` from the agent's
    usage updates; None when the agent said neither."""
    usage = response.usage if response is not None else None
    if usage is None and not cost_usd:
        return None
    return Usage(
        prompt_tokens=usage.input_tokens if usage is not None else 0,
        completion_tokens=usage.output_tokens if usage is not None else 0,
        cost_usd=round(cost_usd, 6),
    )
