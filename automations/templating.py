"""Prompt templates: `{{ payload.a.b }}` and `{{ payload.items.0.name }}`, nothing else.

A substitution walks the payload through dict keys and list indices only: no attribute
access, no filters, no code, so a template an admin writes (or a payload a stranger sends)
can never run anything. A string is inserted as it is, anything else as JSON. Pure: no ORM.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

ROOT = "payload"
_SEGMENT = r"[A-Za-z0-9_-]+"
_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_EXPRESSION = re.compile(rf"\s*({ROOT}(?:\.{_SEGMENT})*)\s*")


class TemplateError(ValueError):
    """A template that does not parse, or a payload it cannot be rendered from."""


@dataclass(frozen=True, slots=True)
class _Part:
    text: str
    path: tuple[str, ...] | None = None
    """None: literal text; else the segments after `payload`."""


def parse(template: str) -> tuple[_Part, ...]:
    """The template's literal texts and substitutions; TemplateError naming the first
    placeholder that is not `{{ payload.path }}`."""
    parts: list[_Part] = []
    last = 0
    for match in _PLACEHOLDER.finditer(template):
        parts.append(_Part(template[last : match.start()]))
        expression = _EXPRESSION.fullmatch(match.group(1))
        if expression is None:
            shown = match.group(0) if len(match.group(0)) <= 80 else match.group(0)[:77] + "..."
            raise TemplateError(
                f"template placeholder {shown} is not of the form {{{{ payload.field.path }}}}"
                " (letters, digits, _ and - per field; list items by number)."
            )
        parts.append(_Part("", tuple(expression.group(1).split(".")[1:])))
        last = match.end()
    parts.append(_Part(template[last:]))
    return tuple(p for p in parts if p.text or p.path is not None)


def _lookup(payload: Any, path: tuple[str, ...]) -> Any:
    value = payload
    for depth, segment in enumerate(path):
        here = ".".join((ROOT, *path[:depth]))
        if isinstance(value, dict) and segment in value:
            value = value[segment]
        elif isinstance(value, list) and segment.isdigit() and int(segment) < len(value):
            value = value[int(segment)]
        else:
            raise TemplateError(
                f"the payload has no field {'.'.join((ROOT, *path))} ({segment!r} not found in "
                f"{here})."
            )
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def render(template: str, payload: Any) -> str:
    """The template with each substitution replaced from `payload`; TemplateError naming the
    path when a field is missing."""
    return "".join(
        part.text if part.path is None else _text(_lookup(payload, part.path))
        for part in parse(template)
    )
