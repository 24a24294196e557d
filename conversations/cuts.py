"""Where a View may be cut when it is condensed, and which of its oldest events to forget.

Pure: no ORM. A cut before index i keeps view[:i] and view[i:] apart, so it is allowed only
where no tool call is separated from its result and no parallel batch (the ActionEvents of one
response and their ObservationEvents) is split. An action still waiting for its result
forbids every cut after it: forgetting it would leave a result with no call.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from .events import ActionEvent, AnyEvent, CondensationEvent, ObservationEvent, UserMessageEvent


def allowed_cuts(view: Sequence[AnyEvent]) -> list[bool]:
    """allowed[i] for i in 0..len(view): whether a cut right before view[i] is allowed."""
    n = len(view)
    spans: list[tuple[int, int]] = []
    """(first, last) index ranges no cut may fall inside."""
    waiting: dict[str, deque[int]] = {}
    batches: dict[str, list[int]] = {}
    for i, event in enumerate(view):
        if isinstance(event, ActionEvent):
            waiting.setdefault(event.tool_call_id, deque()).append(i)
            if event.llm_response_id:
                batches.setdefault(event.llm_response_id, [i, i])[1] = i
        elif isinstance(event, ObservationEvent):
            calls = waiting.get(event.tool_call_id)
            if not calls:
                continue  # a result whose call is not in the View: nothing to keep it with
            start = calls.popleft()
            spans.append((start, i))
            batch = view[start].llm_response_id  # type: ignore[union-attr]
            if batch:
                batches[batch][1] = max(batches[batch][1], i)
    spans.extend((start, n) for calls in waiting.values() for start in calls)
    spans.extend((first, last) for first, last in batches.values())
    # Each span forbids the cuts first+1 .. last: count open spans with a difference array.
    open_spans = [0] * (n + 2)
    for first, last in spans:
        if last > first:
            open_spans[first + 1] += 1
            open_spans[last + 1] -= 1
    allowed, depth = [], 0
    for i in range(n + 1):
        depth += open_spans[i]
        allowed.append(depth == 0)
    return allowed


def head_length(view: Sequence[AnyEvent]) -> int:
    """How many leading events a condensation always keeps: the system prompt and the first
    user message (the task), or only the leading system prompts when there is no user message."""
    for i, event in enumerate(view):
        if isinstance(event, UserMessageEvent):
            return i + 1
    return next((i for i, e in enumerate(view) if e.type != "system.prompt"), len(view))


@dataclass(frozen=True, slots=True)
class Cut:
    """Forget events[start:end] of the View (its summary left out); the new summary goes at
    `start`."""

    start: int
    end: int
    events: list[AnyEvent]
    """The View without its current summary: what start and end index."""

    @property
    def forgotten(self) -> list[AnyEvent]:
        return self.events[self.start : self.end]

    @property
    def kept_tail(self) -> list[AnyEvent]:
        return self.events[self.end :]


def choose_cut(view: Sequence[AnyEvent], sizes: Sequence[int], *, budget: int) -> Cut | None:
    """The oldest events to forget so that the head and what follows the cut fit `budget`.

    `sizes` are the View's events' token estimates, one per event of `view`. The head (see
    head_length) is always kept, and at least one event after it is forgotten. The cut ends at
    the earliest allowed index whose tail fits, so as little as possible is forgotten. When no
    tail fits, the latest call and result (or message) are kept all the same, since the model
    cannot go on without them, unless they are all that is left to forget. None when nothing
    can be forgotten without splitting a pair or a batch."""
    events, tokens = [], []
    for event, size in zip(view, sizes, strict=True):
        if not isinstance(event, CondensationEvent):  # the old summary is replaced, not cut
            events.append(event)
            tokens.append(size)
    allowed = allowed_cuts(events)
    start = head_length(events)
    while start < len(events) and not allowed[start]:
        start += 1
    tail = [0] * (len(events) + 1)
    for i in range(len(events) - 1, -1, -1):
        tail[i] = tail[i + 1] + tokens[i]
    tail_budget = budget - sum(tokens[:start])
    # Ends that keep something: forgetting everything after the head always "fits".
    inner = [end for end in range(start + 1, len(events)) if allowed[end]]
    for end in inner:
        if tail[end] <= tail_budget:
            return Cut(start, end, events)
    if inner:
        return Cut(start, inner[-1], events)
    if start < len(events) and allowed[len(events)]:
        return Cut(start, len(events), events)
    return None
