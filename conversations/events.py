"""The event log's schema: every step of a conversation is one of these immutable models.

Tags (`type`) are stable strings, never class names: renaming a class must not orphan stored
rows. Add a field with a default to evolve a type; add a new tag for a new meaning. A tag this
code does not know loads as `UnknownEvent` so old readers survive new writers.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

SCHEMA_VERSION = 1


class Status(StrEnum):
    IDLE = "idle"
    RUNNING = "running"
    PAUSED = "paused"
    WAITING_FOR_CONFIRMATION = "waiting_for_confirmation"
    WAITING_FOR_SUBAGENTS = "waiting_for_subagents"
    FINISHED = "finished"
    STUCK = "stuck"
    ERROR = "error"


ACTIVE_STATUSES = frozenset({Status.RUNNING})


def _new_id() -> str:
    return uuid.uuid4().hex


def _now() -> datetime:
    return datetime.now(UTC)


class Usage(BaseModel):
    """What one LLM call cost, as LiteLLM reported it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


class BaseEvent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(default_factory=_new_id)
    timestamp: datetime = Field(default_factory=_now)


class SystemPromptEvent(BaseEvent):
    type: Literal["system.prompt"] = "system.prompt"
    content: str
    tools: list[dict[str, Any]] = Field(default_factory=list)
    """The tools' JSON schemas as offered to the model for this conversation."""


POLICY_DECIDER = "policy:team"
"""`by` of a decision the team policy made: a colon is never in a username, so no person can
pass for it."""
HOOK_SENDER_PREFIX = "hook:"
"""Sender of the messages a Stop hook sends back to the agent: "hook:NAME"."""
SKILL_SENDER_PREFIX = "skill:"
"""Sender of a skill loaded by a trigger word in a person's message: "skill:NAME"."""


class SystemContextEvent(BaseEvent):
    """What the agent is told besides its static instructions, read when a run starts (on the
    worker, once the workspace is filled): the date, the workspace, the repository's own
    instructions (untrusted), the names of the secrets it may use. Recorded, so every step of
    the run and a worker that resumes it send the same system prompt."""

    type: Literal["system.context"] = "system.context"
    text: str
    sources: list[str] = Field(default_factory=list)
    """The repository files it quotes (AGENTS.md, ...)."""
    mcp_tools: list[str] = Field(default_factory=list)
    """The team's MCP tools offered when the run started (mcp__SERVER__TOOL): the model gets
    their schemas with each call, beside the system prompt's tools."""


class UserMessageEvent(BaseEvent):
    type: Literal["message.user"] = "message.user"
    text: str
    sender: str | None = None
    """Username of the person who wrote it; None for automations and the CLI."""

    @property
    def from_hook(self) -> bool:
        """Written by a hook for the agent (a Stop hook's nudge), not by a person or an
        automation."""
        return (self.sender or "").startswith(HOOK_SENDER_PREFIX)

    @property
    def from_skill(self) -> bool:
        """A skill's instructions, loaded by a trigger word in a person's message."""
        return (self.sender or "").startswith(SKILL_SENDER_PREFIX)

    @property
    def needs_prompt_check(self) -> bool:
        """Whether UserPromptSubmit hooks must let it through before the model may read it:
        what a person or an automation wrote, not what the control plane added for the agent
        (a hook's nudge, a skill's text; the message that triggered the skill was checked)."""
        return not (self.from_hook or self.from_skill)


class UserMessageCheckedEvent(BaseEvent):
    """The team's UserPromptSubmit hooks let these user messages through, on a worker, before
    the model read them. Which messages are checked is read from the log (this event and
    UserMessageBlockedEvent), so a crash never lets one past unchecked."""

    type: Literal["message.checked"] = "message.checked"
    message_ids: list[str]
    """The UserMessageEvents' ids, in log order."""


class UserMessageBlockedEvent(BaseEvent):
    """A UserPromptSubmit hook refused a user message. The View withdraws the message, so the
    model never reads it, and the run that found it ends."""

    type: Literal["message.blocked"] = "message.blocked"
    message_id: str
    """The refused UserMessageEvent's id."""
    hook: str
    """Name of the hook that refused it."""
    reason: str = ""
    """What the hook said, redacted at the log's door like every event."""


class AgentMessageEvent(BaseEvent):
    type: Literal["message.agent"] = "message.agent"
    text: str
    llm_response_id: str | None = None
    usage: Usage | None = None


@dataclass(frozen=True, slots=True)
class ParsedArguments:
    """A tool call's raw argument string read as JSON: the value, or why it is not JSON.

    Blank means no arguments (`{}`). Shared between readers: treat `value` as read-only."""

    value: Any = None
    """The parsed JSON value (any JSON type); None when `error` is set."""
    error: json.JSONDecodeError | None = None

    @property
    def as_object(self) -> dict[str, Any] | None:
        """The arguments when they are a JSON object, else None."""
        return self.value if self.error is None and isinstance(self.value, dict) else None


@lru_cache(maxsize=256)
def _parse_arguments(raw: str) -> ParsedArguments:
    # Keyed by the string, not stored on the event: a model_copy never carries a stale parse,
    # and the cache stays bounded however many events a worker holds.
    try:
        return ParsedArguments(value=json.loads(raw) if raw.strip() else {})
    except json.JSONDecodeError as exc:
        return ParsedArguments(error=exc.with_traceback(None))


class PermissionChoice(BaseModel):
    """One option an external agent offers when it asks permission (ACP PermissionOption)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    option_id: str
    name: str
    kind: str
    """allow_once, allow_always, reject_once or reject_always."""

    @property
    def allows(self) -> bool:
        return self.kind.startswith("allow")


class FileDiff(BaseModel):
    """A file change an external agent reported with its tool call (ACP diff content)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    old_text: str | None = None
    """None for a new file."""
    new_text: str


class ActionEvent(BaseEvent):
    """A tool call the model asked for. Persisted before the tool runs."""

    type: Literal["tool.call"] = "tool.call"
    tool_call_id: str
    """Provider id; pairs this call with its ObservationEvent."""
    tool: str
    arguments: str
    """The raw argument string from the model, kept verbatim even when it is not valid JSON."""
    llm_response_id: str | None = None
    thought: str = ""
    """Text the model produced alongside the call."""
    batch_index: int = 0
    batch_size: int = 1
    """Parallel calls from one response share llm_response_id and run in batch_index order."""
    usage: Usage | None = None
    """Set on the first call of a batch: the cost of the response that produced it."""
    security_risk: str | None = None
    """The model's own estimate (LOW, MEDIUM, HIGH), when the tool asks for one."""
    risk: str | None = None
    """Effective risk: the higher of the model's estimate and the pattern analyzer's."""
    risk_rules: list[str] = Field(default_factory=list)
    """Ids of the analyzer rules the call tripped (orchestration.control.risk)."""
    requires_confirmation: bool = False
    """Held for a person's decision (ActionDecisionEvent) before it may run."""
    title: str = ""
    """An external agent's own one-line description of the call (ACP tool call title)."""
    kind: str | None = None
    """An external agent's tool kind (ACP: read, edit, delete, move, search, execute, think,
    fetch, switch_mode, other); None for our own tools."""
    locations: list[str] = Field(default_factory=list)
    """Files the call touches, as an external agent reported them ("path" or "path:line")."""
    options: list[PermissionChoice] = Field(default_factory=list)
    """An external agent's permission request: its own options, answered by option id."""

    @property
    def parsed_arguments(self) -> ParsedArguments:
        """`arguments` read as JSON, parsed once per distinct string (the one parser for it)."""
        return _parse_arguments(self.arguments)


class ObservationEvent(BaseEvent):
    type: Literal["tool.result"] = "tool.result"
    tool_call_id: str
    tool: str
    content: str
    is_error: bool = False
    exit_code: int | None = None
    interrupted: bool = False
    rejected: bool = False
    rejection_source: Literal["user", "hook", "policy"] | None = None
    """Who refused the action, when it never ran."""
    rejected_by: str | None = None
    """The person who rejected it (source "user"), by username."""
    diffs: list[FileDiff] = Field(default_factory=list)
    """File changes an external agent's tool call made, shown as diffs."""
    output_file: str | None = None
    """A cut output's whole text, in the workspace (workspaces.outputs), relative to its
    root: the page links to it."""


class Decision(StrEnum):
    """What a person decided about a held action."""

    APPROVED = "approved"
    REJECTED = "rejected"


class ActionDecisionEvent(BaseEvent):
    """A person approved or rejected a held action. Exactly one per held action."""

    type: Literal["action.decision"] = "action.decision"
    action_id: str
    """The held ActionEvent's id."""
    tool_call_id: str
    decision: Decision
    by: str
    """Username of who decided, or POLICY_DECIDER when the team policy answered an external
    agent's request."""
    reason: str = ""
    option_id: str | None = None
    """The external agent's option chosen (its id, never its position), when it offered any."""


class ActionStartedEvent(BaseEvent):
    """A held action began to run after its batch was decided. Written only there: if the
    worker dies mid-action, recovery knows not to run it a second time."""

    type: Literal["tool.started"] = "tool.started"
    tool_call_id: str


class AgentErrorEvent(BaseEvent):
    """Something went wrong outside a tool: the LLM failed, a limit was hit, a run crashed."""

    type: Literal["agent.error"] = "agent.error"
    code: str
    message: str


class StatusChangeEvent(BaseEvent):
    """The only way a conversation's status changes; the store mirrors it onto the row."""

    type: Literal["status.changed"] = "status.changed"
    status: Status
    previous: Status | None = None
    reason: str = ""


class RunStartedEvent(BaseEvent):
    type: Literal["run.started"] = "run.started"
    run_id: str = Field(default_factory=_new_id)
    trigger: str = "user"


class RunFinishedEvent(BaseEvent):
    type: Literal["run.finished"] = "run.finished"
    run_id: str
    status: Status
    reason: str = ""
    worker: str = ""
    """The worker process that ended the run ("host:pid"), when a worker ended it."""


class ChildSpawn(BaseModel):
    """One child conversation a spawning tool call started."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    conversation_id: str
    name: str
    subagent_type: str
    key: str = ""
    """Which request it answers: the delegate task's name, or a workflow's child key."""


class SubagentsSpawnedEvent(BaseEvent):
    """A task, delegate or workflow call started these children, created in the same
    transaction as this event. The parent waits (WAITING_FOR_SUBAGENTS) until they settle."""

    type: Literal["subagents.spawned"] = "subagents.spawned"
    tool_call_id: str
    tool: str
    round: int = 1
    """A workflow asks for children in rounds (each replay up to an unanswered call)."""
    children: list[ChildSpawn]


class ChildResult(BaseModel):
    """How one child ended, as its parent reads it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    conversation_id: str
    name: str
    key: str = ""
    status: str
    """The child's status when it settled (finished, error, stuck, paused, deleted)."""
    answer: str = ""
    """Its final answer (finish message or last agent message), or its partial answer."""
    reason: str = ""
    """Why it ended, when it did not finish."""

    @property
    def succeeded(self) -> bool:
        return self.status == Status.FINISHED.value


class SubagentsSettledEvent(BaseEvent):
    """Every child of one spawn round has ended: their results, written exactly once (under
    the parent's row lock), with what they cost rolled up into the parent's stats."""

    type: Literal["subagents.settled"] = "subagents.settled"
    tool_call_id: str
    round: int = 1
    results: list[ChildResult]
    usage: Usage | None = None


class AgentThoughtEvent(BaseEvent):
    """An external agent's reasoning, aggregated from its thought chunks (one per message)."""

    type: Literal["message.thought"] = "message.thought"
    text: str
    message_id: str | None = None


class PlanItem(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    content: str
    priority: str = "medium"
    status: str = "pending"
    """pending, in_progress or completed."""


class PlanEvent(BaseEvent):
    """An external agent's plan, replaced whole by each update (ACP plan)."""

    type: Literal["plan.updated"] = "plan.updated"
    entries: list[PlanItem]


class AcpCommand(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str = ""


class AcpSessionEvent(BaseEvent):
    """An external agent's process and ACP session for this conversation: started, resumed
    with session/load, or a new session told what happened so far."""

    type: Literal["acp.session"] = "acp.session"
    agent: str
    """The ACP profile's name."""
    session_id: str
    how: Literal["new", "loaded", "replayed"] = "new"
    agent_name: str = ""
    agent_version: str = ""
    load_supported: bool = False
    worker: str = ""
    """The worker process that runs the agent ("host:pid")."""


class AcpStateEvent(BaseEvent):
    """What an external agent said about its session outside messages and tool calls: its
    mode, its slash commands, its context use."""

    type: Literal["acp.state"] = "acp.state"
    mode: str | None = None
    commands: list[AcpCommand] | None = None
    context_used: int | None = None
    context_size: int | None = None


class AcpPromptEvent(BaseEvent):
    """These user messages go to the external agent as one prompt. Written before it is sent:
    a prompt with no AcpTurnEvent after it was lost with its worker, never re-sent blindly."""

    type: Literal["acp.prompt"] = "acp.prompt"
    message_ids: list[str]


class AcpTurnEvent(BaseEvent):
    """One ACP turn ended: the agent's stop reason and what the turn cost, when it said."""

    type: Literal["acp.turn"] = "acp.turn"
    stop_reason: str
    usage: Usage | None = None


class CondensationEvent(BaseEvent):
    """The oldest part of the View, summarised: the View drops the forgotten events and shows
    `summary` at `offset` instead. Nothing is deleted from the log; only the latest
    condensation's summary is shown, so each summary carries the previous one forward."""

    type: Literal["condensation"] = "condensation"
    forgotten_ids: list[str]
    """Ids of the View's events this condensation drops (never a tool call without its result,
    nor part of a parallel batch)."""
    summary: str
    offset: int
    """Where the summary goes: its index in the View once the forgotten events are gone."""
    hard_reset: bool = False
    """Summarising failed: `summary` is only a short note of what was dropped."""
    trigger: Literal["limit", "context_window"] = "limit"
    """Why: the View neared the model's context limit, or the model refused it as too long."""
    usage: Usage | None = None
    """What the summarising call cost, when one answered."""
    kept_head_seqs: list[int] = Field(default_factory=list)
    """Seqs of the head of the View it keeps (the system prompt and the task)."""
    kept_from_seq: int | None = None
    """Every View event from this seq on is kept: with kept_head_seqs, where a reader of the
    log finds the View (conversations.window). None in condensations written before it was
    recorded: a reader then takes the whole log."""


class UnknownEvent(BaseEvent):
    """A stored event whose tag this code does not know. Never written, only read."""

    model_config = ConfigDict(frozen=True, extra="allow")

    type: str
    payload: dict[str, Any] = Field(default_factory=dict)


Event = Annotated[
    SystemPromptEvent
    | SystemContextEvent
    | UserMessageEvent
    | UserMessageCheckedEvent
    | UserMessageBlockedEvent
    | AgentMessageEvent
    | ActionEvent
    | ObservationEvent
    | AgentErrorEvent
    | ActionDecisionEvent
    | ActionStartedEvent
    | StatusChangeEvent
    | RunStartedEvent
    | RunFinishedEvent
    | SubagentsSpawnedEvent
    | SubagentsSettledEvent
    | AgentThoughtEvent
    | PlanEvent
    | AcpSessionEvent
    | AcpStateEvent
    | AcpPromptEvent
    | AcpTurnEvent
    | CondensationEvent,
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def event_tag(cls: type[BaseEvent]) -> str:
    """The `type` tag an event class writes (as stored, and as selectors filter on it)."""
    return cls.model_fields["type"].default


KNOWN_TYPES: frozenset[str] = frozenset(
    event_tag(cls)
    for cls in (
        SystemPromptEvent,
        SystemContextEvent,
        UserMessageEvent,
        UserMessageCheckedEvent,
        UserMessageBlockedEvent,
        AgentMessageEvent,
        ActionEvent,
        ObservationEvent,
        AgentErrorEvent,
        ActionDecisionEvent,
        ActionStartedEvent,
        StatusChangeEvent,
        RunStartedEvent,
        RunFinishedEvent,
        SubagentsSpawnedEvent,
        SubagentsSettledEvent,
        AgentThoughtEvent,
        PlanEvent,
        AcpSessionEvent,
        AcpStateEvent,
        AcpPromptEvent,
        AcpTurnEvent,
        CondensationEvent,
    )
)

AnyEvent = Event | UnknownEvent


def is_llm_step(event: BaseEvent) -> bool:
    """Whether the event is one model output: a plain answer, or the first of a batch of
    tool calls. Step counts (the row's, a run's limit, the stuck detector's) all use this."""
    return isinstance(event, AgentMessageEvent) or (
        isinstance(event, ActionEvent) and event.batch_index == 0
    )


def event_to_payload(event: BaseEvent) -> dict[str, Any]:
    """The JSON-safe dict stored in the envelope's payload column."""
    return event.model_dump(mode="json")


def event_from_payload(type_: str, payload: dict[str, Any]) -> AnyEvent:
    """Load a stored payload; unknown tags become UnknownEvent instead of crashing readers."""
    if type_ not in KNOWN_TYPES:
        return UnknownEvent(
            id=str(payload.get("id") or _new_id()),
            type=type_,
            payload={k: v for k, v in payload.items() if k not in {"id", "type", "timestamp"}},
            **({"timestamp": payload["timestamp"]} if payload.get("timestamp") else {}),
        )
    return EVENT_ADAPTER.validate_python(payload)


__all__ = [
    "HOOK_SENDER_PREFIX",
    "SKILL_SENDER_PREFIX",
    "AcpCommand",
    "AcpPromptEvent",
    "AcpSessionEvent",
    "AcpStateEvent",
    "AcpTurnEvent",
    "AgentThoughtEvent",
    "FileDiff",
    "PermissionChoice",
    "PlanEvent",
    "PlanItem",
    "SCHEMA_VERSION",
    "ActionDecisionEvent",
    "ActionEvent",
    "ActionStartedEvent",
    "AgentErrorEvent",
    "AgentMessageEvent",
    "AnyEvent",
    "BaseEvent",
    "ChildResult",
    "ChildSpawn",
    "CondensationEvent",
    "Event",
    "EVENT_ADAPTER",
    "ObservationEvent",
    "RunFinishedEvent",
    "RunStartedEvent",
    "Status",
    "StatusChangeEvent",
    "SubagentsSettledEvent",
    "SubagentsSpawnedEvent",
    "SystemContextEvent",
    "SystemPromptEvent",
    "UnknownEvent",
    "Usage",
    "UserMessageBlockedEvent",
    "UserMessageCheckedEvent",
    "UserMessageEvent",
    "ValidationError",
    "event_from_payload",
    "event_to_payload",
]
