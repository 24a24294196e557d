"""Conversations: create, list, read events, message, pause, run, stop; their sub-agents."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from django.http import HttpRequest, HttpResponse
from ninja import Header, Router, Schema, Status
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from common.errors import InvalidInput
from common.inputs import Id, Int, Key, Money, Offset, Text
from conversations import store
from conversations.events import Decision
from conversations.events import Status as RunStatus
from conversations.models import Conversation
from conversations.search import ConversationFilter, conversations_matching
from conversations.tree import children_of
from orchestration import archive, erase, fork, run_control, services
from orchestration.control import approvals
from teams.vocabulary import ConfirmationModeName, RiskName
from workspaces.spec import WorkspaceKind, WorkspaceSpec, spec_of

from ..access import Action, conversation_for, conversations_visible_to
from . import ERRORS, ErrorOut
from .idempotency import HEADER, MAX_KEY_CHARS, Answer, answer_once

router = Router(tags=["conversations"])
MAX_PAGE = 1000

IdempotencyKey = Annotated[
    Text(MAX_KEY_CHARS, min_length=1) | None,
    Header(
        alias=HEADER,
        description="Your name for this request. Sent again with the same body within 24"
        " hours, it gets the first answer (marked `Idempotent-Replayed: true`) and nothing is"
        " done twice; with another body or path it is a 422.",
    ),
]


class SourceIn(BaseModel):
    # Plain pydantic, not ninja's Schema: a Schema is also built from any object's attributes,
    # so in the `workspace` union a string it refuses would become a default object.
    model_config = ConfigDict(extra="forbid")

    repo: Text(1000, min_length=1) = Field(
        description="An https URL, a repository the site names (CANVAS_GIT_REPOS; checked out as"
        " a git worktree) or a local path under the site's CANVAS_GIT_LOCAL_ROOTS."
    )
    ref: Text(250) | None = Field(default=None, description="Branch, tag or commit; default HEAD.")


class WorkspaceIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: WorkspaceKind = Field(
        default="local", description="local: a folder on the worker; docker: a container."
    )
    source: SourceIn | None = Field(
        default=None, description="A git repository the workspace starts from."
    )
    image: Text(255) | None = Field(
        default=None, description="docker only; default: the site's CANVAS_DOCKER_IMAGE."
    )


class ConversationIn(Schema):
    prompt: Text(services.MAX_PROMPT_CHARS, min_length=1)
    model: Text(200, min_length=1) = "demo"
    workspace: Text(1000) | WorkspaceIn | None = Field(
        default=None,
        description="A folder name in the team's workspace area (letters, digits, '.', '_', '-';"
        " at most 100 characters); default: the conversation's id. Naming a folder a teammate's"
        " conversation uses shares it. Or an object: the workspace's kind, git source and image,"
        " within the team's policy (400 naming the rule otherwise).",
    )
    title: Text(200) | None = None
    max_iterations: Int(ge=1, le=10_000) | None = None
    team: Id | None = Field(default=None, description="Team id; default: your default team.")
    # Optional limits: they may tighten the team's policy, never loosen it (400 if they would).
    confirmation_mode: ConfirmationModeName | None = None
    risk_threshold: RiskName | None = None
    max_cost_usd: Money | None = Field(default=None, description="Per-run budget, USD.")
    tools: list[Text(100)] | None = Field(
        default=None, max_length=100, description="Default: all the team allows."
    )
    agent: Text(64) | None = Field(
        default=None,
        description="An external ACP agent's profile name (GET /api/teams/{id}/acp-agents): it "
        "runs instead of our own agent and `model`, where the team's policy allows acp:NAME.",
    )


class ConversationPatch(Schema):
    title: Text(200, min_length=1) | None = Field(
        default=None, description="One line; secrets in it are redacted."
    )
    archived: bool | None = Field(
        default=None,
        description="true: out of the lists, kept whole (refused while it runs); false: back.",
    )


class SourceOut(Schema):
    repo: str
    ref: str | None


class WorkspaceOut(Schema):
    kind: str
    source: SourceOut | None
    image: str | None


class ConversationOut(Schema):
    id: uuid.UUID
    team: int
    title: str
    status: str
    model: str
    agent: str = Field(default="", description="The external ACP agent it runs; empty: ours.")
    workspace: str = Field(
        description="The workspace's name in the team's area (a path for older conversations)."
    )
    workspace_spec: WorkspaceOut = Field(description="Its kind, git source and image.")
    closed_at: datetime | None = Field(
        default=None, description="When it was closed: no more messages or runs."
    )
    parent_id: uuid.UUID | None = Field(
        default=None, description="The conversation that spawned this one as a sub-agent."
    )
    parent_action_id: str = Field(
        default="", description="The parent's tool call that spawned it; empty at top level."
    )
    forked_from: uuid.UUID | None = Field(
        default=None, description="The conversation this one was forked from."
    )
    last_seq: int
    steps: int
    tokens_in: int
    tokens_out: int
    cost_usd: float
    archived_at: datetime | None = None
    created_at: datetime
    updated_at: datetime


class ChildOut(Schema):
    id: uuid.UUID
    name: str = Field(description="Its name among its siblings (delegate's tasks); may be empty.")
    subagent_type: str = Field(description="The agent definition it runs (general, ...).")
    status: str
    steps: int
    cost_usd: float
    parent_action_id: str = Field(description="The parent's tool call that spawned it.")


class ChildrenOut(Schema):
    children: list[ChildOut]


class MessageIn(Schema):
    text: Text(services.MAX_PROMPT_CHARS, min_length=1)


class EventsOut(Schema):
    events: list[dict[str, Any]]
    next_seq: int
    """Pass as after_seq to continue; equals the last returned seq (or after_seq if none)."""


def _out(c: Conversation) -> dict[str, Any]:
    return {
        "id": c.pk,
        "team": c.team_id,
        "title": c.title,
        "status": c.status,
        "model": c.model,
        "agent": c.agent,
        "workspace": c.workspace_name,
        "workspace_spec": spec_of(c.workspace_spec).as_json(),
        "closed_at": c.closed_at,
        "parent_id": c.parent_id,
        "parent_action_id": c.parent_action_id,
        "forked_from": c.forked_from_id,
        "last_seq": c.last_seq,
        "steps": c.steps,
        "tokens_in": c.tokens_in,
        "tokens_out": c.tokens_out,
        "cost_usd": float(c.cost_usd),
        "archived_at": c.archived_at,
        "created_at": c.created_at,
        "updated_at": c.updated_at,
    }


def _conversation_id(name: str, given: str | None) -> uuid.UUID | None:
    if given is None:
        return None
    try:
        return uuid.UUID(given)
    except ValueError:
        raise InvalidInput(f"{name}: not a conversation id.") from None


def _spec(given: WorkspaceIn | None) -> WorkspaceSpec | None:
    if given is None:
        return None
    try:
        return WorkspaceSpec.model_validate(given.model_dump())
    except ValidationError as exc:
        raise InvalidInput(
            "workspace: " + "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
        ) from None


def _reply(answer: Answer, response: HttpResponse) -> Status:
    if answer.replayed:
        response["Idempotent-Replayed"] = "true"
    return Status(answer.status, answer.body)


@router.post("", response={201: ConversationOut, **ERRORS, 422: ErrorOut})
def conversation_create(
    request: HttpRequest, body: ConversationIn, response: HttpResponse, key: IdempotencyKey = None
):
    def create() -> tuple[int, dict[str, Any]]:
        named = isinstance(body.workspace, str)
        conversation = services.conversation_create(
            owner=request.user,
            prompt=body.prompt,
            model=body.model,
            workspace=body.workspace if named else None,
            workspace_spec=None if named else _spec(body.workspace),
            title=body.title,
            max_iterations=body.max_iterations,
            team=body.team,
            confirmation_mode=body.confirmation_mode,
            risk_threshold=body.risk_threshold,
            max_cost_usd=body.max_cost_usd,
            tools=body.tools,
            agent=body.agent,
        )
        return 201, _out(conversation)

    return _reply(answer_once(request, key, create), response)


@router.get("", response={200: list[ConversationOut], **ERRORS})
def conversation_list(
    request: HttpRequest, team: Id | None = None, limit: int = 100, offset: Offset = 0,
    q: Text(200) = "", status: RunStatus | None = None, owner: Literal["me", "anyone"] = "anyone",
    model: Text(200) = "", archived: bool = False, parent: Key | None = None,
    top_level: bool = False,
):  # fmt: skip
    """Newest first. `q`: words in the title or any message; `owner=me`: the caller's own;
    archived conversations only with `archived=true` (and then only those); `parent`: only
    the sub-agents that conversation spawned; `top_level=true`: no sub-agents at all."""
    limit = max(1, min(limit, MAX_PAGE))
    chosen = ConversationFilter(
        text=q.strip(), status=status or "", owner_id=request.user.pk if owner == "me" else None,
        model=model.strip(), archived=archived, parent_id=_conversation_id("parent", parent),
        top_level=top_level,
    )  # fmt: skip
    rows = conversations_matching(conversations_visible_to(request.user, team), chosen)
    rows = rows.order_by("-created_at")
    rows = rows[offset : offset + limit]
    return [_out(c) for c in rows]


@router.get("/{conversation_id}", response={200: ConversationOut, **ERRORS})
def conversation_get(request: HttpRequest, conversation_id: Key):
    return _out(conversation_for(request.user, conversation_id, Action.VIEW))


@router.get("/{conversation_id}/children", response={200: ChildrenOut, **ERRORS})
def conversation_children(request: HttpRequest, conversation_id: Key):
    """The sub-agents it spawned directly, oldest first (their own: ask each of them)."""
    conversation = conversation_for(request.user, conversation_id, Action.VIEW)
    return {
        "children": [
            {
                "id": c.id,
                "name": c.name,
                "subagent_type": c.subagent_type,
                "status": c.status,
                "steps": c.steps,
                "cost_usd": float(c.cost_usd),
                "parent_action_id": c.parent_action_id,
            }  # fmt: skip
            for c in children_of(conversation.pk)
        ]
    }


@router.patch("/{conversation_id}", response={200: ConversationOut, **ERRORS})
def conversation_update(request: HttpRequest, conversation_id: Key, body: ConversationPatch):
    """Rename (the title, as one line, redacted like every title) and/or archive or restore;
    each change audited."""
    conversation = conversation_for(request.user, conversation_id, Action.ACT)
    if body.title is None and body.archived is None:
        raise InvalidInput("nothing to change: send a title, archived, or both.")
    if body.title is not None:
        services.conversation_rename(
            conversation_id=conversation.pk, title=body.title, by=request.user
        )
    if body.archived is not None:
        change = archive.conversation_archive if body.archived else archive.conversation_restore
        change(conversation_id=conversation.pk, by=request.user)
    conversation.refresh_from_db()
    return _out(conversation)


@router.delete("/{conversation_id}", response={204: None, **ERRORS})
def conversation_delete(request: HttpRequest, conversation_id: Key):
    """For good: the row, the whole event log and its own workspace folder. Only its owner
    or a team admin; refused while it runs or waits for approval."""
    conversation = conversation_for(request.user, conversation_id, Action.ACT)
    erase.conversation_delete(conversation_id=conversation.pk, by=request.user)
    return Status(204, None)


@router.get("/{conversation_id}/events", response={200: EventsOut, **ERRORS})
def conversation_events(
    request: HttpRequest, conversation_id: Key, after_seq: Offset = 0, limit: int = 500
):
    conversation = conversation_for(request.user, conversation_id, Action.VIEW)
    limit = max(1, min(limit, MAX_PAGE))
    events = store.load(conversation.pk, after_seq=after_seq, limit=limit)
    return {
        "events": [e.as_record() for e in events],
        "next_seq": events[-1].seq if events else after_seq,
    }


@router.post("/{conversation_id}/messages", response={201: dict, **ERRORS, 422: ErrorOut})
def conversation_message(
    request: HttpRequest,
    conversation_id: Key,
    body: MessageIn,
    response: HttpResponse,
    key: IdempotencyKey = None,
):
    conversation = conversation_for(request.user, conversation_id, Action.ACT)

    def post() -> tuple[int, dict[str, Any]]:
        seq = services.conversation_post_message(
            conversation_id=conversation.pk, text=body.text, sender=request.user
        )
        conversation.refresh_from_db()
        return 201, {"seq": seq, "status": conversation.status}

    return _reply(answer_once(request, key, post), response)


class RunIn(Schema):
    """Optional new per-run limits for this conversation, within the team policy."""

    max_iterations: Int(ge=1, le=10_000) | None = None
    max_cost_usd: Money | None = None


@router.post("/{conversation_id}/run", response={202: dict, **ERRORS})
def conversation_run(request: HttpRequest, conversation_id: Key, body: RunIn | None = None):
    conversation = conversation_for(request.user, conversation_id, Action.ACT)
    run_control.conversation_run(
        conversation_id=conversation.pk, by=request.user,
        max_iterations=body.max_iterations if body else None,
        max_cost_usd=body.max_cost_usd if body else None,
    )  # fmt: skip
    return Status(202, {"status": "running"})


@router.post("/{conversation_id}/pause", response={200: dict, **ERRORS})
def conversation_pause(request: HttpRequest, conversation_id: Key):
    conversation = conversation_for(request.user, conversation_id, Action.ACT)
    run_control.conversation_pause(conversation_id=conversation.pk, by=request.user)
    return Status(200, {"status": "paused"})


class RejectIn(Schema):
    reason: Text(2000) = ""
    option_id: Text(200) | None = Field(
        None, description="An external agent's reject option (by id); default: reject_once."
    )


class ApproveIn(Schema):
    option_id: Text(200) | None = Field(
        None, description="An external agent's option (by id); default: its allow_once one."
    )


@router.get("/{conversation_id}/pending", response={200: dict, **ERRORS})
def conversation_pending(request: HttpRequest, conversation_id: Key):
    conversation = conversation_for(request.user, conversation_id, Action.VIEW)
    return {
        "pending": [
            {
                "action_id": p.action_id,
                "tool": p.tool,
                "arguments": p.arguments,
                "risk": p.risk,
                "rules": [rule for rule, _ in p.rules],
                "explanations": dict(p.rules),
                "thought": p.thought,
                "title": p.title,
                "kind": p.kind,
                "locations": list(p.locations),
                "options": [o.model_dump() for o in p.options],
            }  # fmt: skip
            for p in approvals.pending_actions(conversation.pk)
        ]
    }


@router.post("/{conversation_id}/actions/{action_id}/approve", response={200: dict, **ERRORS})
def action_approve(
    request: HttpRequest, conversation_id: Key, action_id: Key, body: ApproveIn | None = None
):
    conversation = conversation_for(request.user, conversation_id, Action.ACT)
    decision = approvals.action_approve(
        conversation_id=conversation.pk, action_id=action_id, by=request.user,
        option_id=body.option_id if body is not None else None,
    )  # fmt: skip
    return {"decision": decision, "status": _status(conversation)}


@router.post("/{conversation_id}/actions/{action_id}/reject", response={200: dict, **ERRORS})
def action_reject(request: HttpRequest, conversation_id: Key, action_id: Key, body: RejectIn):
    conversation = conversation_for(request.user, conversation_id, Action.ACT)
    approvals.action_reject(
        conversation_id=conversation.pk, action_id=action_id, by=request.user,
        reason=body.reason, option_id=body.option_id,
    )  # fmt: skip
    return {"decision": Decision.REJECTED, "status": _status(conversation)}


@router.post("/{conversation_id}/actions/approve-all", response={200: dict, **ERRORS})
def actions_approve_all(request: HttpRequest, conversation_id: Key):
    conversation = conversation_for(request.user, conversation_id, Action.ACT)
    count = approvals.actions_approve_all(conversation_id=conversation.pk, by=request.user)
    return {"approved": count, "status": _status(conversation)}


@router.post("/{conversation_id}/interrupt", response={200: dict, **ERRORS})
def conversation_interrupt(request: HttpRequest, conversation_id: Key):
    conversation = conversation_for(request.user, conversation_id, Action.ACT)
    run_control.conversation_interrupt(conversation_id=conversation.pk, by=request.user)
    return {"status": "paused"}


@router.post("/{conversation_id}/stop", response={200: dict, **ERRORS})
def conversation_stop(request: HttpRequest, conversation_id: Key):
    """Interrupt it and every sub-agent under it that is still active; 409 when nothing in
    that subtree is. Each can be resumed or messaged later, as after Interrupt."""
    conversation = conversation_for(request.user, conversation_id, Action.ACT)
    run_control.conversation_stop(conversation_id=conversation.pk, by=request.user)
    return {"status": _status(conversation)}


@router.post("/{conversation_id}/close", response={200: dict, **ERRORS})
def conversation_close(request: HttpRequest, conversation_id: Key):
    """Stop its run, remove its container; its folder stays until it is deleted. A closed
    conversation takes no messages or runs (409)."""
    conversation = conversation_for(request.user, conversation_id, Action.ACT)
    run_control.conversation_close(conversation_id=conversation.pk, by=request.user)
    return {"status": _status(conversation), "closed": True}


@router.post("/{conversation_id}/resume", response={202: dict, **ERRORS})
def conversation_resume(request: HttpRequest, conversation_id: Key, body: RunIn | None = None):
    return conversation_run(request, conversation_id, body)


def _status(conversation: Conversation) -> str:
    conversation.refresh_from_db(fields=["status"])
    return conversation.status


class ForkIn(Schema):
    at_seq: Int(ge=1) | None = Field(
        default=None,
        description="Copy the log up to this event (a point where nothing is in flight); "
        "default: the last such point.",
    )
    title: Text(200) | None = None


@router.post("/{conversation_id}/fork", response={201: ConversationOut, **ERRORS})
def conversation_fork(request: HttpRequest, conversation_id: Key, body: ForkIn | None = None):
    """A new conversation whose log is this one's up to `at_seq` and whose workspace is a copy
    of this one's folder; it waits for a message. 400 for a cut inside a tool call or a
    sub-agent round (the message names the last quiet event before it)."""
    source = conversation_for(request.user, conversation_id, Action.ACT)
    body = body or ForkIn()
    made = fork.conversation_fork(source=source, by=request.user, at_seq=body.at_seq,
                                  title=body.title)  # fmt: skip
    return Status(201, _out(made))
