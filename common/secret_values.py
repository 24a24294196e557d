"""Every secret value this process has handled, for scrubbing what leaves it outside the log.

The event log redacts per team (conversations.redaction). Log lines have no team, so the
logging filter (canvas.logging) redacts every value the process has seen: whoever decrypts or
receives a value calls `remember`. Shared by all apps, so it imports nothing of theirs.
Values stay for the process's lifetime: a value that was replaced may still sit in a traceback.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

_lock = threading.Lock()
_values: dict[str, str] = {}
_generation = 0


def remember(secrets: Mapping[str, str]) -> None:
    """Add {name: value} pairs; cheap when they are already known."""
    global _generation
    new = {v: n for n, v in secrets.items() if v and v not in _values}
    if not new:
        return
    with _lock:
        _values.update(new)
        _generation += 1


def known() -> tuple[int, list[tuple[str, str]]]:
    """(generation, [(name, value), ...]); the generation changes whenever a value is added.

    Pairs, not a mapping by name: many values share a name (every team's API_KEY, a secret's
    value before and after a change) and every one of them must stay redactable."""
    with _lock:
        return _generation, [(name, value) for value, name in _values.items()]


def generation() -> int:
    return _generation
