"""Our own agent's side of a slice: recover what a dead runner left, then steps, each one model
response and its tool calls through policy, approvals and hooks. The chain around it (lease,
heartbeat, hand-over) is orchestration.chain.slices; this module only appends under the token it
was given.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from datetime import UTC, datetime
from functools import cached_property, partial
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from conversations.broadcast import publish_tree_changed
from conversations.events import (
    HOOK_SENDER_PREFIX,
    ActionDecisionEvent,
    ActionEvent,
    ActionStartedEvent,
    AgentErrorEvent,
    BaseEvent,
    ObservationEvent,
    RunStartedEvent,
    Status,
    StatusChangeEvent,
    UserMessageEvent,
    is_llm_step,
)
from conversations.models import Conversation
from conversations.tree import ancestors
from conversations.view import unanswered_actions
from skills.catalog import Catalog, available_skills
from teams.budget import spend_add
from teams.policies import policy_for_team
from workspaces.factory import workspace_fill
from workspaces.sandbox import UNSANDBOXED_SETTING, commands_unsandboxed
from workspaces.sources import SourceError
from workspaces.spec import spec_of

from ..chain.lease_writes import lease_append
from ..chain.transient import TRANSIENT_FAULTS, retry_transient
from ..chain.workers import draining
from ..control import hook_points
from ..control.confirmation import assess, needs_confirmation
from ..control.notify import notify_status_on_commit
from ..control.prompt_check import prompt_check
from ..mcp.slice import mcp_tools
from ..subagents.definitions import SPAWNING_TOOLS as SPAWNING
from ..subagents.parent import ParentSide, is_spawning, pending_spawning
from ..title_model import title_request
from ..tools.base import Tool, ToolContext, team_secrets, tool_schema
from ..tools.invoke_skill import InvokeSkillTool, skill_schema
from ..tools.registry import tools_for
from ..workspace import workspace_of
from .agent import AgentConfig
from .condense import Condenser
from .context import (
    build_context,
    context_due,
    explicit_cache_markers,
    latest_context,
    with_context,
)
from .history import History, history_refresh
from .limits import LIMIT_REASONS, limit_reached, run_limits, tool_refused
from .llm import LLMClient, LLMError, LLMResponse, model_client
from .loop import (
    events_from_response,
    execute_action,
    interrupted_observation,
    rejected_observation,
    run_end_events,
)
from .model_call import Interrupted, ModelCall
from .profiles import UnknownProfileError, profile_get, profile_with_api_key
from .skill_triggers import skills_to_load
from .stuck import detect_stuck

logger = logging.getLogger(__name__)

UNSANDBOXED = "unsandboxed"
UNSANDBOXED_MESSAGE = (
    "Commands in this conversation run WITHOUT a sandbox: no working bubblewrap on the worker, "
    f"and the site allows unsandboxed commands ({UNSANDBOXED_SETTING}). The agent's terminal "
    "and the team's hooks run as the worker's own user and can reach its files, processes "
    "and network."
)

NOTIFY_STATUSES = frozenset(
    {Status.WAITING_FOR_CONFIRMATION, Status.FINISHED, Status.ERROR, Status.STUCK}
)


def worker_identity() -> str:
    """Which worker process runs this: named in the run.finished events it writes."""
    return f"{settings.CANVAS_WORKER_HOST}:{os.getpid()}"


class SliceRunner:
    def __init__(
        self,
        conversation: Conversation,
        token: str,
        llm: LLMClient | None = None,
        cancel: threading.Event | None = None,
    ):
        self.conversation_id = str(conversation.pk)
        self.token = token
        self.cancel = cancel or threading.Event()
        self.workspace_root = conversation.workspace_path or None
        self.title = conversation.title
        self.workspace_spec = spec_of(conversation.workspace_spec)
        self.config = AgentConfig.model_validate(conversation.agent_config)
        self.team_id: int = conversation.team_id
        self.secret_names = conversation.secret_names
        # Re-read at every slice: a policy tightened mid-run applies from the next slice.
        policy = policy_for_team(self.team_id)
        self.limits = run_limits(self.config, policy)
        self.tools: dict[str, Tool] = {
            t.name: t for t in tools_for(self.config.tools) if self.limits.tool_allowed(t.name)
        }
        self.mcp_tool_names: list[str] = []
        """The MCP tools added to `tools` for this slice (orchestration.mcp.slice)."""
        self.subagents = ParentSide(self)
        self.schemas = [self._schema(t) for t in self.tools.values()]
        self.parent_id = conversation.parent_id
        self._ancestors: list[str] | None = None
        self.ctx = ToolContext(
            conversation_id=self.conversation_id,
            workspace=workspace_of(conversation, policy=policy),
            secrets=team_secrets(conversation.team_id, only=conversation.secret_names),
            cancel=self.cancel,
        )
        # One snapshot per slice: two hook lookups per step cost more than its two appends.
        self.hooks = hook_points.TeamHooks.load(self.team_id, network=policy.network)
        self._llm = llm
        self._recovery_ran_tools = False
        self.history: History = history_refresh(self.conversation_id)
        self.condenser = Condenser(self)

    def _schema(self, tool: Tool) -> dict[str, Any]:
        """A tool's schema for this slice: spawning tools name the sub-agent types, and
        invoke_skill the skills, as they are now."""
        if tool.name in SPAWNING:
            return self.subagents.schema(tool, tool_schema(tool))
        if tool.name == InvokeSkillTool.name:
            return skill_schema(tool_schema(tool), self.skills)
        return tool_schema(tool)

    @property
    def llm(self) -> LLMClient:
        if self._llm is None:
            profile = profile_get(self.config.model, self.team_id)
            self._llm = model_client(profile_with_api_key(profile))
        return self._llm

    def append(self, events: list[BaseEvent], *, spend: float = 0.0) -> None:
        """Append under the lease; `spend` (dollars) goes on the team's monthly bill in the
        same transaction, so a crash can neither lose nor double-count it. Without spend the
        append is atomic on its own (one statement on Postgres, no transaction around it).
        A dropped connection is retried on a fresh one while the lease holds (lease_writes)."""
        also = partial(spend_add, self.team_id, spend) if spend else None
        stored = lease_append(self.conversation_id, events, token=self.token, also=also)
        self.history.extend(stored, self.conversation_id)
        if self.parent_id is not None and any(
            isinstance(e, StatusChangeEvent) or is_llm_step(e) for e in events
        ):
            self.tree_changed()

    def tree_changed(self) -> None:
        """Tell the pages of this conversation's ancestors that their agent tree changed."""
        if self.parent_id is None:
            return
        if self._ancestors is None:
            self._ancestors = [str(pk) for pk, _ in ancestors(self.conversation_id)]
        ids = self._ancestors
        transaction.on_commit(lambda: publish_tree_changed(ids))

    def end(self, status: Status, reason: str, *first: BaseEvent) -> None:
        """End the run; `first` (an error, a blocked message) goes in the same append."""
        events: list[BaseEvent] = list(first)
        events.extend(
            run_end_events(status, reason, self.history.state.run_id, worker=worker_identity())
        )
        self.append(events)
        self._notify(status, reason)

    def recover(self) -> bool:
        """Give every action left without a result one, before the model is asked anything.

        Held batches whose decisions are in run now, in order: approved and unflagged actions
        execute, and a held action nobody decided (the person wrote a message instead) is
        refused. Anything else without a result was cut off by a dying worker: read-only tools
        are re-run, the rest get an observation saying they were interrupted.

        First of all, a command a previous runner left running here is killed: nothing of
        this run may act beside it. Then, on the conversation's first slice, the workspace is
        filled from its git source, if it has one, and its baseline is taken (what the Changes
        panel compares with), before any tool touches it. A source that cannot be checked out
        ends the run with an error saying why.
        """
        self.ctx.workspace.stop_leftovers()
        if not self._fill():
            return False
        self.ctx.workspace.baseline_take()
        events = self.history.events
        decisions = {e.action_id: e for e in events if isinstance(e, ActionDecisionEvent)}
        started = {e.tool_call_id for e in events if isinstance(e, ActionStartedEvent)}
        held_batches = {
            e.llm_response_id
            for e in events
            if isinstance(e, ActionEvent) and e.requires_confirmation
        }
        for action in unanswered_actions(events):
            tool = self.tools.get(action.tool)
            decision = decisions.get(action.id)
            if is_spawning(action):
                continue  # answered from the log below, never re-run blindly
            if action.tool_call_id in started or (
                action.llm_response_id not in held_batches and not (tool and tool.read_only)
            ):
                self.append([interrupted_observation(action)])
            elif action.requires_confirmation and decision is None:
                self.append(
                    [rejected_observation(action, source="user", by="Nobody",
                                          reason="it was not approved before the conversation "
                                          "moved on")]
                )  # fmt: skip
            elif action.llm_response_id in held_batches:
                self._recovery_ran_tools = True
                self.append([ActionStartedEvent(tool_call_id=action.tool_call_id)])
                if not self.run_action(action):
                    return False
            else:  # read-only, safe to run again
                self._recovery_ran_tools = True
                self.run_action(action)
        return self._children_answered()

    def _children_answered(self) -> bool:
        """Every spawning call has its result (True), or the run now waits for children."""
        if self.history.state.status != Status.RUNNING:
            return True  # nothing runs anyway; run() stops at the status
        if not pending_spawning(self.history.events):
            return True
        self._recovery_ran_tools = True
        return self.subagents.answer_pending(self._spawning_action)

    def _spawning_action(self, action: ActionEvent) -> bool:
        """A task, delegate or workflow call: spawn, wait, or record its result. The team's
        PreToolUse hooks judge it once, before anything was spawned for it."""
        if not self.subagents.spawned(action) and not self._may_run(action):
            return True
        observation = self.subagents.run(action)
        if observation is not None:
            self.append([observation])
        return True

    def _may_run(self, action: ActionEvent) -> bool:
        """The policy and the team's PreToolUse hooks let the action run; otherwise its
        refusal is appended as its result."""
        if not self.limits.tool_allowed(action.tool):
            self.append([tool_refused(action.tool_call_id, action.tool)])
            return False
        verdict = hook_points.pre_tool_use(
            team_id=self.team_id, conversation_id=self.conversation_id, action=action,
            arguments=action.parsed_arguments.as_object or {}, cwd=self.workspace_root,
            hooks=self.hooks,
        )  # fmt: skip
        self._report_hook_failures(verdict)
        if not verdict.allowed:
            self.append(
                [rejected_observation(action, source="hook", by=verdict.hook,
                                      reason=verdict.reason)]
            )  # fmt: skip
        return verdict.allowed

    def _fill(self) -> bool:
        """The workspace's git source, once; False when it failed (the run ended ERROR)."""
        if self.history.state.status != Status.RUNNING:
            return True
        try:
            workspace_fill(self.ctx.workspace, self.workspace_spec)
        except SourceError as exc:
            error = AgentErrorEvent(code="workspace_source", message=exc.message)
            self.end(Status.ERROR, "the workspace's source could not be checked out", error)
            return False
        return True

    def run_action(self, action: ActionEvent) -> bool:
        """Run one action through policy, hooks and the tool; False when a finish was asked."""
        if is_spawning(action) and action.tool in self.tools:
            return self._spawning_action(action)
        if not self._may_run(action):
            return True
        outcome = execute_action(action, self.tools, self.ctx)
        observation = outcome.observation
        if self.cancel.is_set() and not outcome.finish:
            observation = observation.model_copy(update={"interrupted": True})
        after = hook_points.post_tool_use(
            team_id=self.team_id, conversation_id=self.conversation_id, action=action,
            observation=observation, cwd=self.workspace_root, hooks=self.hooks,
        )  # fmt: skip
        self._report_hook_failures(after)
        if not after.allowed:
            observation = observation.model_copy(
                update={"content": f"{observation.content}\n[hook {after.hook!r}: {after.reason}]"}
            )
        self.append([observation])
        return not outcome.finish

    def _report_hook_failures(self, verdict) -> None:
        if verdict.failures:
            self.append(
                [AgentErrorEvent(code="hook_failed", message=line) for line in verdict.failures]
            )

    def _complete(self) -> LLMResponse:
        """Ask the model, abandoning the call if the run is interrupted meanwhile."""
        messages = with_context(
            self.history.messages, latest_context(self.history.events), cache=self.cache_markers
        )
        call = ModelCall(
            self.llm, messages, self.schemas, on_abandoned=self.bill_abandoned
        )  # `self.llm` resolves the profile (and its key) here, not in the call's thread
        return call.result(self.cancel)

    def bill_abandoned(self, response: LLMResponse) -> None:
        try:
            retry_transient(
                partial(spend_add, self.team_id, response.usage.cost_usd),
                what="billing an abandoned model call",
            )
        except TRANSIENT_FAULTS:
            logger.warning("could not bill an abandoned model call of conversation %s",
                           self.conversation_id, exc_info=True)  # fmt: skip

    def _finish(self, reason: str, final_message: str) -> bool:
        """End the run unless a Stop hook sends the agent back to work. False: run ended."""
        verdict = hook_points.stop(
            team_id=self.team_id, conversation_id=self.conversation_id,
            final_message=final_message, cwd=self.workspace_root, hooks=self.hooks,
        )  # fmt: skip
        self._report_hook_failures(verdict)
        if verdict.allowed:
            self.end(Status.FINISHED, reason)
            return False
        self.append(
            [UserMessageEvent(text=f"[Stop hook {verdict.hook}] {verdict.reason}",
                              sender=f"{HOOK_SENDER_PREFIX}{verdict.hook}")]
        )  # fmt: skip
        return not self._ended_stuck()

    def check_prompts(self) -> bool:
        """Run the team's UserPromptSubmit hooks on every user message not yet checked; False
        when one was blocked (the run ended). Loops until the history the model would read
        holds no unchecked message, since one may arrive while the hooks run."""
        while pending := list(self.history.state.unchecked.values()):
            check = prompt_check(
                team_id=self.team_id, conversation_id=self.conversation_id, messages=pending,
                cwd=self.workspace_root, hooks=self.hooks,
            )  # fmt: skip
            if check.blocked is not None:
                self.end(Status.ERROR, check.end_reason, *check.events)
                return False
            self.append(check.events)
            if self.parent_id is None:  # a sub-agent's title is its name and task
                title_request(self.conversation_id)  # only now may a model read the prompt
        return True

    @cached_property
    def cache_markers(self) -> bool:
        try:
            model = profile_get(self.config.model, self.team_id).model
        except UnknownProfileError:
            return False
        return explicit_cache_markers(model)

    def record_context(self) -> None:
        """At a run's start (after recovery filled the workspace): what the agent is told
        besides its instructions (orchestration.step.context), recorded for the whole run."""
        if not context_due(self.history.events):
            return
        from teams.models import Team
        from teams.secrets import secret_list

        names = [info.name for info in secret_list(Team.objects.get(pk=self.team_id))]
        if self.secret_names is not None:
            names = [name for name in names if name in self.secret_names]
        root = Path(self.workspace_root) if self.workspace_root else None
        shown = str(root or ".")
        if self.workspace_spec.kind == "docker":
            from workspaces.docker import CONTAINER_ROOT  # docker-py: only when used

            shown = CONTAINER_ROOT
        event = build_context(
            root=root, shown_root=shown,
            kind=self.workspace_spec.kind, secret_names=names, today=datetime.now(UTC).date(),
            mcp_tools=self.mcp_tool_names,
        )  # fmt: skip
        self.append([event])

    @cached_property
    def skills(self) -> Catalog:
        """Read once per slice, like the sub-agent types: a new slice sees a new skill."""
        root = Path(self.workspace_root) if self.workspace_root else None
        return available_skills(team_id=self.team_id, workspace_root=root)

    def load_triggered_skills(self) -> None:
        """Skills a person's new message names by a trigger word, appended before the model
        reads the message (orchestration.step.skill_triggers); only where invoke_skill is one
        of the run's tools, since a policy that refuses the tool refuses skills."""
        if InvokeSkillTool.name not in self.tools:
            return
        loads = skills_to_load(self.history.view, self.skills)
        if loads:
            self.append(loads)

    def step(self) -> bool:
        """One LLM response and its tool calls. Returns False once the run has stopped."""
        if not self.check_prompts():
            return False
        self.load_triggered_skills()
        reached = limit_reached(self.limits, self.history.state, self.team_id)
        if reached is not None:
            self.end(Status.ERROR, LIMIT_REASONS[reached.code], reached)
            return False
        try:
            response = self.condenser.respond(self._complete)
        except Interrupted:
            return False
        except (LLMError, UnknownProfileError) as exc:
            code = getattr(exc, "code", "unknown_model")
            self.end(Status.ERROR, "model error", AgentErrorEvent(code=code, message=str(exc)))
            return False
        produced = self._assess(events_from_response(response))
        actions = [e for e in produced if isinstance(e, ActionEvent)]
        if any(a.requires_confirmation for a in actions):
            held = sum(a.requires_confirmation for a in actions)
            reason = (
                f"{held} action{'s' if held > 1 else ''} need{'' if held > 1 else 's'} approval"
            )
            waiting = StatusChangeEvent(
                status=Status.WAITING_FOR_CONFIRMATION, previous=Status.RUNNING, reason=reason
            )
            self.append([*produced, waiting], spend=response.usage.cost_usd)
            self._notify(Status.WAITING_FOR_CONFIRMATION, reason)
            return False
        self.append(produced, spend=response.usage.cost_usd)
        if not actions:
            return self._finish("the agent answered", response.content or "")
        finished = False
        for action in actions:
            finished = not self.run_action(action) or finished
            if self.cancel.is_set():
                return False
        if any(is_spawning(a) for a in actions) and not self._children_answered():
            return False
        if finished:
            final = next(
                (e.content for e in reversed(self.history.events)
                 if isinstance(e, ObservationEvent) and e.tool == "finish"), "",
            )  # fmt: skip
            return self._finish("the agent called finish", final)
        return not self._ended_stuck()

    def _ended_stuck(self) -> bool:
        """End the run if the agent is going round in circles (orchestration.step.stuck)."""
        stuck = detect_stuck(self.history.events)
        if stuck is None:
            return False
        self.end(
            Status.STUCK, stuck.message,
            AgentErrorEvent(code=f"stuck_{stuck.pattern}",
                            message=f"{stuck.message} Send a message to get it going again."),
        )  # fmt: skip
        return True

    def _assess(self, produced: list[BaseEvent]) -> list[BaseEvent]:
        """Fill in each action's risk and whether it must wait for a person."""
        assessed: list[BaseEvent] = []
        for event in produced:
            if isinstance(event, ActionEvent):
                tool = self.tools.get(event.tool)
                event = assess(event, tool, self.workspace_root)
                if needs_confirmation(
                    event, tool, mode=self.limits.confirmation_mode,
                    threshold=self.limits.risk_threshold,
                ):  # fmt: skip
                    event = event.model_copy(update={"requires_confirmation": True})
            assessed.append(event)
        return assessed

    def _notify(self, status: Status, reason: str) -> None:
        """Tell the team's webhook (if any) about moments people act on. A sub-agent's end is
        its parent's business (it reads the result); only its approvals need a person."""
        if self.parent_id is not None and status != Status.WAITING_FOR_CONFIRMATION:
            return
        if status in NOTIFY_STATUSES:
            notify_status_on_commit(
                conversation_id=self.conversation_id, team_id=self.team_id,
                status=status.value, reason=reason, title=self.title,
            )  # fmt: skip

    def mark_unsandboxed(self) -> None:
        """Say once per run, in the log people read, that its commands run without a sandbox
        (the site allows it where none works). The web process cannot know; the worker can."""
        history = self.history
        if history.state.status != Status.RUNNING or not commands_unsandboxed():
            return
        for event, seq in zip(reversed(history.events), reversed(history.seqs), strict=True):
            if isinstance(event, AgentErrorEvent) and event.code == UNSANDBOXED:
                return
            if isinstance(event, RunStartedEvent):
                if seq < history.window_from:
                    return  # condensed since it started: its first slice said so
                break
        self.append([AgentErrorEvent(code=UNSANDBOXED, message=UNSANDBOXED_MESSAGE)])

    def run(self, *, max_steps: int, max_seconds: float) -> None:
        with mcp_tools(self):  # the team's MCP servers, connected for this slice only
            self._run(max_steps=max_steps, max_seconds=max_seconds)

    def _run(self, *, max_steps: int, max_seconds: float) -> None:
        self.mark_unsandboxed()
        if not self.recover():
            return
        self.record_context()
        deadline = time.monotonic() + max_seconds
        for step in range(max_steps):
            # The first step reads what __init__ loaded plus this runner's own appends, unless
            # recovery ran tools (time enough for someone to write).
            if step or self._recovery_ran_tools:
                self.history = history_refresh(self.conversation_id)
            if self.history.state.status != Status.RUNNING or self.cancel.is_set():
                return
            if draining.is_set():  # a warm shutdown: hand the run over at this step boundary
                return
            if not self.step() or time.monotonic() >= deadline:
                return
