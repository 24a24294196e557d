"""The agent's decisions, free of the database: response -> events, action -> observation.

Every way a tool call can go wrong (unknown tool, arguments that are not JSON or do not fit
the schema, an exception inside the tool) becomes an error observation the model can read
and correct. No tool call is ever left without a result.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import ValidationError

from conversations.events import (
    ActionEvent,
    AgentMessageEvent,
    BaseEvent,
    ObservationEvent,
    RunFinishedEvent,
    Status,
    StatusChangeEvent,
)
from workspaces.base import WorkspacePathError

from ..tools.base import SECURITY_RISK_ARGUMENT, Tool, ToolArgs, ToolContext, ToolResult

if TYPE_CHECKING:
    from .llm import LLMResponse

INTERRUPTED_MESSAGE = (
    "This action was interrupted before it reported a result (the worker running it stopped). "
    "It may have partly run: verify the state before relying on it or repeating it."
)


def run_end_events(
    status: Status, reason: str, run_id: str | None, *, finished_reason: str | None = None,
    previous: Status = Status.RUNNING, worker: str = "",
) -> list[BaseEvent]:  # fmt: skip
    """The pair that ends a run: the status leaving `previous`, then run.finished."""
    return [
        StatusChangeEvent(status=status, previous=previous, reason=reason),
        RunFinishedEvent(
            run_id=run_id or "", status=status, reason=finished_reason or reason, worker=worker
        ),
    ]


def events_from_response(response: LLMResponse) -> list[BaseEvent]:
    """The events one LLM response means: a batch of actions, or a plain message.

    A batch always gets an id, even from a provider that sends none: recovery tells held
    batches from others by it, and a shared None would make unrelated actions one batch."""
    if not response.tool_calls:
        return [
            AgentMessageEvent(
                text=response.content or "", llm_response_id=response.id, usage=response.usage
            )
        ]
    size = len(response.tool_calls)
    batch_id = response.id or f"resp_{uuid.uuid4().hex}"
    return [
        ActionEvent(
            tool_call_id=call.id,
            tool=call.name,
            arguments=call.arguments,
            llm_response_id=batch_id,
            thought=(response.content or "") if index == 0 else "",
            batch_index=index,
            batch_size=size,
            usage=response.usage if index == 0 else None,
        )
        for index, call in enumerate(response.tool_calls)
    ]


def _format_validation_error(tool: str, exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "(arguments)"
        problems.append(f"- {where}: {error['msg']}")
    return f"Invalid arguments for tool '{tool}':\n" + "\n".join(problems)


@dataclass(frozen=True, slots=True)
class Outcome:
    observation: ObservationEvent
    finish: bool = False


def _observation(action: ActionEvent, result: ToolResult) -> ObservationEvent:
    return ObservationEvent(
        tool_call_id=action.tool_call_id,
        tool=action.tool,
        content=result.content,
        is_error=result.is_error,
        exit_code=result.exit_code,
        output_file=result.output_file,
    )


def _error(action: ActionEvent, message: str) -> ObservationEvent:
    return _observation(action, ToolResult(content=message, is_error=True))


def parse_arguments(action: ActionEvent, tools: Mapping[str, Tool]) -> ToolArgs | ObservationEvent:
    """The call's validated arguments, or the error result that says what is wrong with it."""
    tool = tools.get(action.tool)
    if tool is None:
        available = ", ".join(sorted(tools)) or "(none)"
        return _error(action, f"Unknown tool '{action.tool}'. Available tools: {available}.")
    parsed = action.parsed_arguments
    if (exc := parsed.error) is not None:
        return _error(
            action,
            f"Arguments for tool '{action.tool}' are not valid JSON ({exc.msg} at "
            f"position {exc.pos}). Send a JSON object matching the tool's schema.",
        )
    data = parsed.value
    if not isinstance(data, dict):
        return _error(
            action,
            f"Arguments for tool '{action.tool}' must be a JSON object, not {type(data).__name__}.",
        )
    data = {k: v for k, v in data.items() if k != SECURITY_RISK_ARGUMENT}  # for the policy only
    try:
        return tool.args_model.model_validate(data)
    except ValidationError as exc:
        return _error(action, _format_validation_error(action.tool, exc))


def execute_action(action: ActionEvent, tools: Mapping[str, Tool], ctx: ToolContext) -> Outcome:
    args = parse_arguments(action, tools)
    if isinstance(args, ObservationEvent):
        return Outcome(args)
    tool = tools[action.tool]
    try:
        result = tool.run(args, ctx)
    except WorkspacePathError as exc:
        return Outcome(_error(action, str(exc)))
    except Exception as exc:  # a tool bug must not kill the run: the model reads it instead
        return Outcome(_error(action, f"Tool '{action.tool}' failed: {type(exc).__name__}: {exc}"))
    return Outcome(_observation(action, result), finish=result.finish)


def rejected_observation(
    action: ActionEvent, *, source: str, by: str, reason: str = ""
) -> ObservationEvent:
    """What the model reads when a person, a hook or the policy refused its action."""
    who = {"user": f"{by} rejected", "hook": f"The hook {by!r} blocked"}.get(
        source, "The team policy blocked"
    )
    content = f"{who} this action; it did not run."
    if reason:
        content += f" Reason: {reason}"
    content += " Choose another way to proceed, or ask for guidance."
    return ObservationEvent(
        tool_call_id=action.tool_call_id,
        tool=action.tool,
        content=content,
        is_error=True,
        rejected=True,
        rejection_source=source,  # type: ignore[arg-type]
        rejected_by=by if source == "user" else None,
    )


def interrupted_observation(action: ActionEvent, *, by: str | None = None) -> ObservationEvent:
    content = (
        INTERRUPTED_MESSAGE
        if by is None
        else (
            f"{by} interrupted this action while it ran; it may have partly run. Verify the state "
            "before relying on it or repeating it."
        )
    )
    return ObservationEvent(
        tool_call_id=action.tool_call_id,
        tool=action.tool,
        content=content,
        is_error=True,
        interrupted=True,
    )
