"""The part of a condensed log its readers still need: the window.

Pure: no ORM. A condensation that records where its View starts (CondensationEvent's
kept_head_seqs and kept_from_seq) makes everything older than that start dead weight for a
runner: the View is the kept head, the condensation and what follows. So the window is

- the kept head, and every event from kept_from_seq on;
- the latest run.started and system.context before kept_from_seq: which run is in progress,
  and what its agent was told when it started.

A cold reader loads only these (store.load_window) and a warm History drops the rest at each
condensation (orchestration.step.history), so both hold the same events and derive the same
View, whichever worker runs the next step. Counts over the whole run (its steps, cost and
sub-agents) come from the conversation row, which mirrors them at every append.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .events import AnyEvent, CondensationEvent

MARK_TYPES = ("run.started", "system.context", "condensation")
"""Event types a cold reader looks up by type (an index covers them): the marks kept before
the window, and the condensation that says where the window starts."""
KEPT_MARKS = ("run.started", "system.context")


@dataclass(frozen=True, slots=True)
class Window:
    head_seqs: frozenset[int]
    from_seq: int

    @classmethod
    def of(cls, event: AnyEvent) -> Window | None:
        """The window a condensation starts; None for any other event, and for condensations
        written before they recorded their View's start (a reader then takes the whole log)."""
        if not isinstance(event, CondensationEvent) or event.kept_from_seq is None:
            return None
        return cls(frozenset(event.kept_head_seqs), event.kept_from_seq)

    def keep(self, seqs: Sequence[int], types: Sequence[str]) -> list[int]:
        """Indexes (in order) of the events, given by seq and type in log order, that are in
        the window."""
        marks: dict[str, int] = {}
        for index, (seq, type_) in enumerate(zip(seqs, types, strict=True)):
            if seq >= self.from_seq:
                break
            if type_ in KEPT_MARKS:
                marks[type_] = index
        kept_marks = set(marks.values())
        return [
            index
            for index, seq in enumerate(seqs)
            if seq >= self.from_seq or seq in self.head_seqs or index in kept_marks
        ]
