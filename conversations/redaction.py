"""Secret redaction at the event log's door.

`store.append` replaces every secret value of the conversation's team with `<secret:NAME>`
before a row is written, so the log, the API, websockets and the LLM's history never hold one.
This module is pure (no ORM) and knows nothing of teams: whoever owns secrets registers a
source with `register_secret_source` at startup (canvas does, with teams' decrypting reader).

Cost: the store passes the team's `secrets_version` (read under the append's row lock). Version
0 means the team never had a secret: no lookup at all. Otherwise one redactor per (team,
version) is built once per process and reused until the version moves.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from functools import cache, lru_cache
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

import ahocorasick

from .events import BaseEvent, event_from_payload, event_to_payload
from .secret_forms import anchor_text, secret_forms

SecretSource = Callable[[int], Mapping[str, str]]
"""team id -> {NAME: value} of that team's secrets, decrypted."""

CACHE_TEAMS = 4096
RETIRED_PER_TEAM = 16
"""Old values kept after a secret changes: a command started before an update or rotation of
the value may still print the old one."""


class Redactor:
    """Replaces each value, and its common encodings, with `<secret:NAME>` in strings.

    One regex over every form of every value is slow to build and to scan (character classes
    at most positions: seconds per string at a few hundred values). So a text is first scanned
    once for the forms' anchors, literals that any match contains (an Aho-Corasick automaton,
    linear in the text whatever the number of values); only the forms whose anchors appear are
    joined into a pattern, compiled once per such set and cached.
    """

    def __init__(self, secrets: Mapping[str, str] | Iterable[tuple[str, str]]) -> None:
        pairs = secrets.items() if isinstance(secrets, Mapping) else secrets
        forms: list[tuple[int, str, str, str]] = []
        seen: set[str] = set()
        for name, value in pairs:
            if not value or value in seen:
                continue  # the same value under two names: the first name wins
            seen.add(value)
            forms.extend((f.max_len, f.pattern, name, f.anchor) for f in secret_forms(value))
        # Longest first: where two forms match at one position, the longer one is replaced
        # whole (a secret that extends another must not leave its tail behind).
        forms.sort(key=lambda f: -f[0])
        self._patterns = [f"(?P<s{i}>{f[1]})" for i, f in enumerate(forms)]
        self._replacements = [f"<secret:{f[2]}>" for f in forms]
        by_anchor: dict[str, list[int]] = {}
        for i, form in enumerate(forms):
            by_anchor.setdefault(form[3], []).append(i)
        self._always = tuple(by_anchor.pop("", ()))  # an empty anchor cannot be searched for
        self._anchor_forms = list(by_anchor.values())
        self._automaton = ahocorasick.Automaton()
        for number, anchor in enumerate(by_anchor):
            self._automaton.add_word(anchor, number)
        if by_anchor:
            self._automaton.make_automaton()
        self.max_match = max((f[0] for f in forms), default=0)
        """The longest text one match can span."""
        self._compiled = lru_cache(maxsize=256)(self._compile)

    def __bool__(self) -> bool:
        return bool(self._patterns)

    def _pattern_for(self, text: str) -> re.Pattern[str] | None:
        """The forms that can match in `text`, as one pattern; None when none can."""
        if not self._patterns or not text:
            return None
        found: set[int] = set()
        if self._anchor_forms:
            found = {number for _, number in self._automaton.iter(anchor_text(text))}
        if not found and not self._always:
            return None
        indices = sorted({*self._always, *(i for n in found for i in self._anchor_forms[n])})
        return self._compiled(tuple(indices))

    def _compile(self, indices: tuple[int, ...]) -> re.Pattern[str]:
        return re.compile("|".join(self._patterns[i] for i in indices))

    def redact(self, text: str) -> str:
        pattern = self._pattern_for(text)
        return text if pattern is None else pattern.sub(self.replacement, text)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        pattern = self._pattern_for(text)
        return iter(()) if pattern is None else pattern.finditer(text)

    def replacement(self, match: re.Match[str]) -> str:
        return self._replacements[int(match.lastgroup[1:])]  # type: ignore[index]

    def redact_value(self, value: Any) -> Any:
        """`value` with every string inside it (dict keys included, nested) redacted."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            return [self.redact_value(v) for v in value]
        if isinstance(value, dict):
            return {self.redact_value(k): self.redact_value(v) for k, v in value.items()}
        return value

    def redact_event(self, event: BaseEvent) -> BaseEvent:
        """The event with its text fields redacted; the same object when nothing matched.

        Works on the stored payload and validates it back, so the result is a valid event of
        the same type. Identity and typed fields (id, type, timestamp, enums) are left alone:
        replacing those would make the event invalid, and they are never free text.
        """
        payload = event_to_payload(event)
        skip = _structural_fields(type(event))
        changed = False
        for key, value in payload.items():
            if key in skip:
                continue
            redacted = self.redact_value(value)
            if redacted != value:
                payload[key] = redacted
                changed = True
        if not changed:
            return event
        return event_from_payload(event.type, payload)  # type: ignore[attr-defined]

    def redact_events(self, events: Sequence[BaseEvent]) -> list[BaseEvent]:
        return [self.redact_event(e) for e in events]


class StreamRedactor:
    """Redacts a text stream chunk by chunk without ever letting a secret out whole.

    `feed` returns what is safe to emit now and holds back the tail that a secret (or one of its
    encodings) could still be completing; `flush` releases the rest at the end. A secret split
    across chunks at any point is thus seen whole before anything of it is emitted.
    """

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._held = ""

    def feed(self, chunk: str) -> str:
        if not self._redactor:
            return chunk
        text = self._held + chunk
        # A match starting at or after `cut` might continue in the next chunk.
        cut = len(text) - (self._redactor.max_match - 1)
        if cut <= 0:
            self._held = text
            return ""
        out: list[str] = []
        pos = 0
        for match in self._redactor.finditer(text):
            if match.start() >= cut:
                break
            if match.end() > cut:  # straddles the cut: decide once more text has arrived
                cut = match.start()
                break
            out.append(text[pos : match.start()])
            out.append(self._redactor.replacement(match))
            pos = match.end()
        out.append(text[pos:cut])
        self._held = text[cut:]
        return "".join(out)

    def flush(self) -> str:
        text, self._held = self._held, ""
        return self._redactor.redact(text)


@cache
def _structural_fields(cls: type) -> frozenset[str]:
    names = {"id", "type", "timestamp"}
    for name, field in getattr(cls, "model_fields", {}).items():
        if _is_structural(field.annotation):
            names.add(name)
    return frozenset(names)


def _is_structural(annotation: Any) -> bool:
    """Enums, literals and timestamps: values a redaction would turn invalid."""
    origin = get_origin(annotation)
    if origin is Literal:
        return True
    if origin is Union or origin is UnionType:
        args = [a for a in get_args(annotation) if a is not type(None)]
        return bool(args) and all(_is_structural(a) for a in args)
    return isinstance(annotation, type) and issubclass(annotation, Enum | datetime)


# -- where secrets come from -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _TeamEntry:
    version: int
    values: dict[str, str]
    retired: tuple[tuple[str, str], ...]
    redactor: Redactor


_source: SecretSource | None = None
_cache: OrderedDict[int, _TeamEntry] = OrderedDict()
_lock = threading.Lock()


def register_secret_source(source: SecretSource | None) -> SecretSource | None:
    """Install the reader of team secrets (None removes it), forget cached redactors, and
    return the source it replaced."""
    global _source
    with _lock:
        previous, _source = _source, source
        _cache.clear()
    return previous


def redactor_for_team(team_id: int, secrets_version: int) -> Redactor | None:
    """The redactor for the team's secrets as of `secrets_version`; None when nothing to redact.

    Version 0 means the team never had a secret, so no source call is made. The source is asked
    again only when the version read by the caller is newer than the cached one. Raises whatever
    the source raises (e.g. values that cannot be decrypted): never redact with a partial set.
    """
    if _source is None or not secrets_version:
        return None
    entry = _cache.get(team_id)
    if entry is None or entry.version < secrets_version:
        entry = _refresh(team_id, secrets_version, _source, entry)
    return entry.redactor or None


def _refresh(
    team_id: int, version: int, source: SecretSource, previous: _TeamEntry | None
) -> _TeamEntry:
    values = dict(source(team_id))  # outside the lock: it queries and decrypts
    retired = list(previous.retired) if previous else []
    if previous is not None:
        retired += [(n, v) for n, v in previous.values.items() if values.get(n) != v]
    kept = tuple(retired[-RETIRED_PER_TEAM:])
    entry = _TeamEntry(version, values, kept, Redactor([*values.items(), *kept]))
    with _lock:
        current = _cache.get(team_id)
        if current is not None and current.version > version:
            return current  # a concurrent refresh saw a newer version; keep that one
        _cache[team_id] = entry
        _cache.move_to_end(team_id)
        while len(_cache) > CACHE_TEAMS:
            _cache.popitem(last=False)
    return entry
