"""A tool's output as the stream shows it: short outputs whole, long ones as head and tail.

A 5,000-line output must not make the page (or its socket frame) huge: the card carries the
first and last lines, and "show all" fetches the whole text from the server on demand
(canvas.stream_views). Lines are clipped by count and by characters, so one enormous line
is clipped too.
"""

from __future__ import annotations

from dataclasses import dataclass

HEAD_LINES = 30
TAIL_LINES = 20
PART_CHARS = 4_000
"""At most this many characters in each of head and tail."""
COMPACT_LINES = 6
"""A card shows this many lines of a longer output until the reader opens it."""


@dataclass(frozen=True, slots=True)
class ToolOutput:
    head: str
    """All of the text when nothing is hidden."""
    tail: str = ""
    hidden_lines: int = 0
    """Lines between head and tail left out (0 with only characters clipped)."""
    total_lines: int = 0
    clipped: bool = False

    @property
    def compact(self) -> bool:
        """Shown folded to COMPACT_LINES lines, with "Show more" (stream.css, tool-rows.js)."""
        return self.total_lines > COMPACT_LINES

    @property
    def text(self) -> str:
        """What the card shows, for plain-text uses (tests, logs)."""
        return self.head if not self.clipped else f"{self.head}\n…\n{self.tail}"


def _first_chars(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _last_chars(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def clip_output(
    text: str,
    *,
    head_lines: int = HEAD_LINES,
    tail_lines: int = TAIL_LINES,
    part_chars: int = PART_CHARS,
) -> ToolOutput:
    lines = text.splitlines()
    total = len(lines)
    if total <= head_lines + tail_lines and len(text) <= 2 * part_chars:
        return ToolOutput(head=text, total_lines=total)
    if total <= head_lines + tail_lines:  # few, very long lines: clip characters only
        return ToolOutput(
            head=_first_chars(text, part_chars),
            tail=_last_chars(text[part_chars:], part_chars),
            total_lines=total,
            clipped=True,
        )
    return ToolOutput(
        head=_first_chars("\n".join(lines[:head_lines]), part_chars),
        tail=_last_chars("\n".join(lines[total - tail_lines :]), part_chars),
        hidden_lines=total - head_lines - tail_lines,
        total_lines=total,
        clipped=True,
    )
