"""Condensation: the oldest part of a long View, summarised by the agent's own model.

Before a step's model call, when the View's running estimate (orchestration.step.history)
nears the model's context limit, and again whenever the provider refuses a request as too
long, the oldest events after the task are forgotten and summarised into a CondensationEvent.
It is appended through the runner (the log's one door, under the run lease), and the View
applies it (conversations.view), so a worker resuming the run reads the same View. The cut
never splits a tool call from its result or a parallel batch (conversations.cuts).

If summarising fails (an error, an empty answer), a hard reset forgets the same events with a
short note in place of a summary: the run goes on either way. An interrupt while the model
summarises abandons the call as any model call is abandoned.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Literal

from conversations.cuts import Cut, choose_cut
from conversations.events import CondensationEvent, Usage, UserMessageEvent

from .context import latest_context
from .context_size import CHARS_PER_TOKEN, TRIGGER_FRACTION, context_limit, event_tokens
from .llm import ContextWindowError, LLMError, LLMResponse
from .model_call import ModelCall
from .profiles import UnknownProfileError, profile_get
from .summary_prompt import summary_request

if TYPE_CHECKING:
    from .runner import SliceRunner

logger = logging.getLogger(__name__)

KEEP_FRACTION = 0.4
"""The head and the latest events kept beside the summary: a share of the context limit."""
SUMMARY_FRACTION = 0.2
"""A summary longer than this share of the limit is clipped, so condensing always gains."""
REQUEST_FRACTION = 0.6
"""The summarising request's transcript fits this share of the limit."""
CONTEXT_RETRIES = 2
"""Condensations one step may try after the model refused its View as too long."""
MIN_GAIN_FRACTION = 0.1
"""A condensation the limit calls for must forget at least this share of the limit: when the
task itself (the head, always kept) fills the context, forgetting the latest call every step
would only make the agent lose its place. Until the View grows by as much, it is not tried
again; a refusal from the provider still condenses whatever it can."""

Trigger = Literal["limit", "context_window"]


class Condenser:
    def __init__(self, runner: SliceRunner) -> None:
        self.runner = runner

    @cached_property
    def limit(self) -> int | None:
        """The model's context limit in tokens, None when unknown (then only a refusal from
        the provider condenses)."""
        profile = getattr(self.runner.llm, "profile", None)
        if profile is None:
            try:
                profile = profile_get(self.runner.config.model, self.runner.team_id)
            except UnknownProfileError:
                return None
        return context_limit(profile)

    @cached_property
    def context_tokens(self) -> int:
        """The run's system context (orchestration.step.context): sent beside the View, so
        counted beside it. Read once per slice, after the runner recorded it."""
        context = latest_context(self.runner.history.events)
        return len(context.text) // CHARS_PER_TOKEN if context is not None else 0

    def due(self) -> bool:
        """Whether the View nears the limit: reads two running counts, never the history."""
        if not self.limit:
            return False
        history = self.runner.history
        estimate = history.view_tokens + self.context_tokens
        return max(estimate, history.last_prompt_tokens) >= self.limit * TRIGGER_FRACTION

    _futile_below: int = 0
    """The View's estimate under which a condensation due to the limit would gain too little."""

    def respond(self, complete: Callable[[], LLMResponse]) -> LLMResponse:
        """`complete()`'s answer, condensing first when due, and again (at most
        CONTEXT_RETRIES times) when the model refuses the View as too long. Raises what
        `complete` raises, ContextWindowError once condensing cannot help."""
        if self.due() and self.runner.history.view_tokens >= self._futile_below:
            self.condense("limit")
        for attempt in range(CONTEXT_RETRIES + 1):
            try:
                return complete()
            except ContextWindowError:
                if attempt == CONTEXT_RETRIES or not self.condense("context_window"):
                    raise
        raise AssertionError("unreachable")

    def condense(self, trigger: Trigger) -> bool:
        """Append one condensation of the View's oldest part; False when nothing could be
        forgotten. Raises Interrupted when the run is interrupted while the model summarises."""
        history = self.runner.history
        # Unknown limit, refused View: aim at what the refused request measured.
        limit = self.limit or max(history.view_tokens, history.last_prompt_tokens)
        view = history.view
        cut = choose_cut(view, [event_tokens(e) for e in view], budget=int(limit * KEEP_FRACTION))
        if cut is None:
            return False
        gain = sum(event_tokens(e) for e in cut.forgotten)
        if trigger == "limit" and gain < limit * MIN_GAIN_FRACTION:
            self._futile_below = history.view_tokens + int(limit * MIN_GAIN_FRACTION)
            return False
        previous = next((e for e in view if isinstance(e, CondensationEvent)), None)
        summary = self._summarise(cut, previous, limit)
        text = summary.text
        max_chars = int(limit * SUMMARY_FRACTION * CHARS_PER_TOKEN)
        if len(text) > max_chars:
            text = text[:max_chars] + " [...]"
        event = CondensationEvent(
            forgotten_ids=[e.id for e in cut.forgotten],
            summary=text,
            offset=cut.start,
            hard_reset=summary.hard_reset,
            trigger=trigger,
            usage=summary.usage,
            kept_head_seqs=[history.seq_of(e.id) for e in cut.events[: cut.start]],
            # With nothing kept after the cut, the View goes on with whatever follows what
            # this runner has read (someone may have appended meanwhile).
            kept_from_seq=(
                history.seq_of(cut.kept_tail[0].id) if cut.kept_tail else history.last_seq + 1
            ),
        )
        self.runner.append([event], spend=summary.usage.cost_usd if summary.usage else 0.0)
        return True

    def _summarise(self, cut: Cut, previous: CondensationEvent | None, limit: int) -> Summary:
        head = cut.events[: cut.start]
        task = next((e.text for e in reversed(head) if isinstance(e, UserMessageEvent)), "")
        messages = summary_request(
            task=task,
            previous=previous.summary if previous else None,
            forgotten=cut.forgotten,
            max_chars=int(limit * REQUEST_FRACTION * CHARS_PER_TOKEN),
        )
        # A hard reset carries a real summary forward, never an earlier reset's note.
        kept = previous.summary if previous and not previous.hard_reset else None
        runner = self.runner
        try:
            call = ModelCall(runner.llm, messages, [], on_abandoned=runner.bill_abandoned)
            response = call.result(runner.cancel)
        except (LLMError, UnknownProfileError) as exc:
            logger.warning("summarising conversation %s failed: %s", runner.conversation_id, exc)
            return Summary(hard_reset_note(len(cut.forgotten), str(exc), kept), None, True)
        text = (response.content or "").strip()
        if not text:
            note = hard_reset_note(len(cut.forgotten), "empty answer", kept)
            return Summary(note, response.usage, True)
        return Summary(text, response.usage, False)


@dataclass(frozen=True, slots=True)
class Summary:
    text: str
    usage: Usage | None
    """What the summarising call cost, when one answered."""
    hard_reset: bool
    """`text` is a hard reset's note: summarising failed."""


def hard_reset_note(forgotten: int, why: str, previous: str | None) -> str:
    """What stands in for a summary that could not be written."""
    note = (
        f"{forgotten} earlier event{'s' if forgotten != 1 else ''} of this conversation "
        f"{'were' if forgotten != 1 else 'was'} dropped to fit the context window; "
        f"summarising {'them' if forgotten != 1 else 'it'} failed ({why[:200]}). "
        "The task is above and the latest events follow: check the workspace's state "
        "before relying on earlier results."
    )
    if previous:
        note += f"\n\nThe summary of what came before them:\n{previous}"
    return note
