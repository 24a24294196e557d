"""Driving runs by hand: scripted prompts, and the chain of slices a worker would run."""

from __future__ import annotations

import json

from orchestration.chain.slices import run_slice


def script(*turns, **options) -> str:
    """A prompt for the `scripted` model: each turn answers one LLM call. `options` go beside
    the turns (title, summary, context_window: orchestration.step.scripted)."""
    return json.dumps({"script": list(turns), **options})


def drive(dispatched: list, limit: int = 100) -> None:
    """Run enqueued slices in order until the chain stops, as a worker would."""
    for _ in range(limit):
        if not dispatched:
            return
        conversation_id, slice_id = dispatched.pop(0)
        assert run_slice(conversation_id, slice_id) is None
    raise AssertionError("the run did not stop")
