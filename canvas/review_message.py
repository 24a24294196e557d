"""A diff review as one message to the agent: the reviewer's line comments, each citing
file:line with the lines it is about, in one user message (Vibe Kanban's review loop).

Pure. The review page keeps pending comments in the browser and posts them as JSON;
`parse_comments` checks them (bad input is an InvalidInput naming the comment and the field)
and canvas.review looks each one's lines up in the diff before `review_message` writes the
text. The text is exact and cannot be steered by what a reviewer types: each comment's words
are quoted line by line ("> "), so a comment cannot pose as another citation; the quoted code
sits in a fence longer than any run of backticks in it; a path with control characters or
edge spaces is written as a JSON string.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError

from common.errors import InvalidInput

from .diff_view import Side

MAX_COMMENTS = 100
MAX_COMMENT_CHARS = 5_000
MAX_NOTE_CHARS = 10_000
MAX_QUOTED_LINES = 12
"""A longer selection quotes its first lines and says how many more it covers."""


class ReviewComment(BaseModel):
    """One pending comment as the review page posts it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: Annotated[str, StringConstraints(min_length=1, max_length=4096)]
    side: Side
    start: Annotated[int, Field(ge=1)]
    end: Annotated[int, Field(ge=1)]
    body: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_COMMENT_CHARS)
    ]


_COMMENTS = TypeAdapter(list[ReviewComment])


def parse_comments(raw: str) -> list[ReviewComment]:
    """The page's JSON list of comments, checked: at least one, at most MAX_COMMENTS, each
    with start <= end."""
    try:
        comments = _COMMENTS.validate_json(raw or "[]")
    except ValidationError as exc:
        error = exc.errors()[0]
        where = [str(part) for part in error["loc"]]
        if len(where) >= 2 and where[0].isdigit():
            field = " ".join(where[1:])
            raise InvalidInput(f"comment {int(where[0]) + 1}: {field}: {error['msg']}.") from None
        raise InvalidInput(f"the comments are not a valid list: {error['msg']}.") from None
    if not comments:
        raise InvalidInput("the review has no comments: select a line and comment on it first.")
    if len(comments) > MAX_COMMENTS:
        raise InvalidInput(f"a review holds at most {MAX_COMMENTS} comments.")
    for number, comment in enumerate(comments, 1):
        if comment.end < comment.start:
            raise InvalidInput(f"comment {number}: its last line is before its first.")
    return comments


@dataclass(frozen=True, slots=True)
class CitedComment:
    comment: ReviewComment
    code: list[str]
    """The lines it is about as the diff shows them, each with its sign (+, -, space)."""


def citation(comment: ReviewComment) -> str:
    """`path:12`, `path:12-14`; old-side lines say so ("before the change")."""
    lines = f"{comment.start}" if comment.start == comment.end else f"{comment.start}-{comment.end}"
    where = f"{_path(comment.path)}:{lines}"
    return where if comment.side == "new" else f"{where} (before the change)"


def review_message(cited: list[CitedComment], note: str = "") -> str:
    """The message: a line saying what it is, the reviewer's general note (quoted) if any, then
    each comment, ordered by file, then side (now before old), then line."""
    count = f"{len(cited)} comment{'s' if len(cited) != 1 else ''}"
    parts = [
        f"Review of your changes: {count}. Please address each one. Line numbers are those of "
        'the files as they are now, except where marked "before the change".'
    ]
    if note.strip():
        parts.append(_quoted(note))
    order = sorted(cited, key=lambda c: (c.comment.path, c.comment.side == "old", c.comment.start))
    for item in order:
        block = [citation(item.comment)]
        if item.code:
            block.append(_fenced(item.code))
        block.append(_quoted(item.comment.body))
        parts.append("\n".join(block))
    return "\n\n".join(parts) + "\n"


def _quoted(text: str) -> str:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").strip("\n").split("\n")
    return "\n".join(f"> {line}".rstrip() for line in lines)


_BACKTICKS = re.compile(r"`+")


def _fenced(code: list[str]) -> str:
    shown = [line.rstrip("\r") for line in code[:MAX_QUOTED_LINES]]  # a CRLF file's lines
    if len(code) > MAX_QUOTED_LINES:
        shown.append(f"  … {len(code) - MAX_QUOTED_LINES} more lines")
    longest = max((len(run) for line in shown for run in _BACKTICKS.findall(line)), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join([f"{fence}diff", *shown, fence])


def _path(path: str) -> str:
    if path != path.strip() or any(ord(c) < 32 or ord(c) == 127 for c in path):
        return json.dumps(path, ensure_ascii=False)
    return path
