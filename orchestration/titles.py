"""A conversation's default title, in plain words, from its first prompt.

Pure. A script prompt (the scripted model's JSON with a "script" list) reads "Scripted run:
N steps"; anything else gives its first line with Markdown marks (headings, bullets,
emphasis, code fences) dropped, cut at a word near TITLE_WORDS_CHARS. Secrets are redacted
by the caller (orchestration.services), as for every title.
"""

from __future__ import annotations

import json
import re

TITLE_MAX_CHARS = 200
"""The row's limit (Conversation.title)."""
TITLE_WORDS_CHARS = 80
"""A default title is cut near here, at a word."""

_LEADING_MARKS = re.compile(r"^(?:#{1,6}\s+|>\s*|[-*+]\s+|\d+[.)]\s+)+")
_INLINE_MARKS = re.compile(r"(\*\*|__|`+|~~)")


def _script_steps(prompt: str) -> int | None:
    try:
        value = json.loads(prompt)
    except ValueError:
        return None
    script = value.get("script") if isinstance(value, dict) else None
    return len(script) if isinstance(script, list) else None


def _first_line(prompt: str) -> str:
    for line in prompt.splitlines():
        words = " ".join(_INLINE_MARKS.sub("", _LEADING_MARKS.sub("", line.strip())).split())
        if words and not words.startswith("```"):
            return words
    return ""


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return cut.rstrip(" ,.;:-") + "…"


def default_title(prompt: str) -> str:
    """The title a conversation gets when nobody gives one ("" for a prompt of no words)."""
    steps = _script_steps(prompt.strip())
    if steps is not None:
        return f"Scripted run: {steps} step{'' if steps == 1 else 's'}"
    return _cut(_first_line(prompt), TITLE_WORDS_CHARS)


def clean_title(title: str) -> str:
    """A title a person typed: one line, spaces collapsed ("" when nothing is left)."""
    return " ".join(title.split())


TITLE_INSTRUCTION = (
    "Write a title of at most eight words for a conversation that starts with the user's "
    "message below. Answer with the title only: no quotes, no final period."
)
"""The system message of a model-title request (orchestration.title_model); the scripted
model recognises it."""
TITLE_PROMPT_CHARS = 4000
"""How much of the first prompt a model-title request sends."""


def model_title(answer: str | None) -> str:
    """A model's answer to TITLE_INSTRUCTION as a title: its first line of words, without
    quotes, a label ("Title:") or a final period, cut like a default title ("" for none)."""
    line = _first_line(answer or "")
    line = re.sub(r"^title\s*:\s*", "", line, flags=re.IGNORECASE)
    line = line.strip("\"'“”‘’ ").rstrip(".")
    return _cut(line, TITLE_WORDS_CHARS)
