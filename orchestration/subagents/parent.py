"""The parent's side of sub-agents, inside its runner: carry out task, delegate and workflow
calls, and wait for children without holding a worker.

A spawning call is answered from the log whenever its runner meets it: not yet spawned, it
spawns (spawn.py); spawned with a round still open, it waits; all rounds settled, task and
delegate already have their result (written by settling), and a workflow runs its script again
from the top with every finished child's answer read back from the `subagents.settled` events,
so it spawns only what has no answer yet, or returns its value. A crash anywhere repeats
nothing that finished.

Waiting is a status (WAITING_FOR_SUBAGENTS) set under the parent's row lock after the log is
read again under it: settling takes the same lock, so a child that ends meanwhile is either
already in the log (no wait) or finds the parent waiting and continues it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.db import transaction

from conversations.events import (
    ActionEvent,
    ObservationEvent,
    Status,
    StatusChangeEvent,
    SubagentsSettledEvent,
    SubagentsSpawnedEvent,
)
from conversations.models import Conversation
from conversations.view import unanswered_actions

from ..step.history import history_refresh
from ..step.loop import parse_arguments
from ..tools.base import Tool
from .acp_types import acp_definitions
from .definitions import SPAWNING_TOOLS, Catalog, available_definitions
from .results import failure_text, observation_for
from .settle import parent_settle, unsettled_rounds
from .spawn import ChildAsk, Parent, SpawnRefused, spawn_children
from .team_agents import team_agent_definitions
from .workflow_script import Done, Failed, ScriptLimits, run_script

if TYPE_CHECKING:
    from ..step.runner import SliceRunner

MAX_TYPES_IN_SCHEMA = 50


def is_spawning(action: ActionEvent) -> bool:
    return action.tool in SPAWNING_TOOLS


def pending_spawning(events) -> list[ActionEvent]:
    """Spawning calls without a result: what must be answered before the model speaks."""
    return [a for a in unanswered_actions(events) if is_spawning(a)]


class ParentSide:
    def __init__(self, runner: SliceRunner) -> None:
        self.runner = runner

    @cached_property
    def catalog(self) -> Catalog:
        """Read once per slice: the team's definitions and the workspace's files may change
        between slices, and a new slice sees the change."""
        root = self.runner.workspace_root
        team_id = self.runner.team_id
        return available_definitions(
            team=[
                *team_agent_definitions(team_id),
                *acp_definitions(team_id, self.runner.limits.policy),
            ],
            workspace_root=Path(root) if root else None,
        )

    def schema(self, tool: Tool, base: dict[str, Any]) -> dict[str, Any]:
        """A spawning tool's schema naming the sub-agent types this conversation may use."""
        catalog = self.catalog
        definitions = catalog.definitions[:MAX_TYPES_IN_SCHEMA]
        listing = "\n".join(f"- {d.name}: {d.description}" for d in definitions)
        schema = copy.deepcopy(base)
        function = schema["function"]
        function["description"] += f"\n\nSub-agent types:\n{listing}"
        names = [d.name for d in definitions]
        properties = function["parameters"].get("properties", {})
        if "subagent_type" in properties:
            properties["subagent_type"]["enum"] = names
        tasks = properties.get("tasks", {}).get("items", {})
        ref = tasks.get("$ref", "")
        if ref:  # delegate's task items live in $defs
            name = ref.rsplit("/", 1)[-1]
            item = function["parameters"].get("$defs", {}).get(name, {})
            item.get("properties", {}).get("subagent_type", {})["enum"] = names
        return schema

    # --- one call -------------------------------------------------------------------------

    def run(self, action: ActionEvent) -> ObservationEvent | None:
        """The call's result, or None while it waits for children (spawned now or before)."""
        parsed = parse_arguments(action, self.runner.tools)
        if isinstance(parsed, ObservationEvent):
            return parsed
        events = self.runner.history.events
        rounds = [
            e for e in events
            if isinstance(e, SubagentsSpawnedEvent) and e.tool_call_id == action.tool_call_id
        ]  # fmt: skip
        settled = {
            e.round: e for e in events
            if isinstance(e, SubagentsSettledEvent) and e.tool_call_id == action.tool_call_id
        }  # fmt: skip
        if any(r.round not in settled for r in rounds):
            return None
        if action.tool == "workflow":
            return self._workflow(action, parsed, len(rounds), list(settled.values()))
        if rounds:  # settled in the same transaction as its result: only a hand-written log
            last = rounds[-1]
            return observation_for(last, settled[last.round].results)
        return self._spawn(action, 1, _asks(action.tool, parsed))

    def spawned(self, action: ActionEvent) -> bool:
        return any(
            isinstance(e, SubagentsSpawnedEvent) and e.tool_call_id == action.tool_call_id
            for e in self.runner.history.events
        )

    def _workflow(
        self, action: ActionEvent, args: Any, rounds: int, settled: list[SubagentsSettledEvent]
    ) -> ObservationEvent | None:
        results = [r for event in settled for r in event.results]
        failed = next((r for r in results if not r.succeeded), None)
        if failed is not None:
            return _error(
                action, "The workflow stopped: " + failure_text(failed, what="its sub-agent")
            )
        policy = self.runner.limits.policy
        limits = ScriptLimits(max_children=policy.max_children_per_run or 1000)
        outcome = run_script(args.script, {r.key: r.answer for r in results}, limits=limits)
        if isinstance(outcome, Failed):
            return _error(action, outcome.message)
        if isinstance(outcome, Done):
            value = outcome.value
            content = value if isinstance(value, str) else json.dumps(value, indent=2)
            return ObservationEvent(tool_call_id=action.tool_call_id, tool=action.tool,
                                    content=content)  # fmt: skip
        asks = [
            ChildAsk(key=r.key, name=f"{r.agent}-{r.key.split('-', 1)[0]}", prompt=r.prompt,
                     agent=r.agent)
            for r in outcome.requests
        ]  # fmt: skip
        return self._spawn(action, rounds + 1, asks)

    def _spawn(
        self, action: ActionEvent, round: int, asks: list[ChildAsk]
    ) -> ObservationEvent | None:
        runner = self.runner
        state = runner.history.state
        parent = Parent(
            conversation=Conversation.objects.select_related("team").get(pk=runner.conversation_id),
            config=runner.config, limits=runner.limits, run_children=state.run_children,
            run_cost=state.run_cost, mcp_tools=tuple(runner.mcp_tool_names),
        )  # fmt: skip
        try:
            stored = spawn_children(
                parent, tool_call_id=action.tool_call_id, tool=action.tool, round=round,
                asks=asks, catalog=self.catalog, lease_token=runner.token,
            )  # fmt: skip
        except SpawnRefused as exc:
            return _error(action, str(exc))
        runner.history.extend(stored, runner.conversation_id)
        runner.tree_changed()
        return None

    # --- waiting --------------------------------------------------------------------------

    def wait_if_pending(self) -> bool:
        """Move to WAITING_FOR_SUBAGENTS if a round is still open; False when nothing is (the
        runner goes on: a workflow may need another replay)."""
        runner = self.runner
        parent_settle(runner.conversation_id)  # ends noticed by nobody yet (a killed worker)
        with transaction.atomic():
            Conversation.objects.select_for_update().filter(pk=runner.conversation_id).only(
                "id"
            ).get()
            runner.history = history_refresh(runner.conversation_id)
            rounds = unsettled_rounds(runner.history.events)
            if not rounds:
                return False
            count = sum(len(r.children) for r in rounds)
            runner.append(
                [
                    StatusChangeEvent(
                        status=Status.WAITING_FOR_SUBAGENTS, previous=Status.RUNNING,
                        reason=f"waiting for {count} sub-agent{'s' if count != 1 else ''}",
                    )
                ]
            )  # fmt: skip
        return True

    def answer_pending(self, run_action: Callable[[ActionEvent], bool]) -> bool:
        """Carry out every spawning call without a result until all have one (True: the
        model may be asked again) or the run waits for children (False). Bounded: a slice
        that has not got there leaves the rest to the next one, which starts here again."""
        for _ in range(8):
            pending = pending_spawning(self.runner.history.events)
            if not pending:
                return True
            for action in pending:
                run_action(action)
                if self.runner.cancel.is_set():
                    return False
            if not pending_spawning(self.runner.history.events):
                return True
            if self.wait_if_pending():
                return False
        return False


def _asks(tool: str, args: Any) -> list[ChildAsk]:
    if tool == "task":
        name = args.description.strip() or args.subagent_type
        return [ChildAsk(key="task", name=name, prompt=args.prompt, agent=args.subagent_type)]
    return [
        ChildAsk(key=t.name, name=t.name, prompt=t.prompt, agent=t.subagent_type)
        for t in args.tasks
    ]


def _error(action: ActionEvent, message: str) -> ObservationEvent:
    return ObservationEvent(
        tool_call_id=action.tool_call_id, tool=action.tool, content=message, is_error=True
    )
