"""The review page's data and its one write: every changed file's diff, numbered and coloured,
in split or unified rows; and `review_post`, which sends the reviewer's line comments to the
agent as one user message (canvas.review_message) through the ordinary message service.

The diffs are canvas.workspace_reads' (redacted, binary and large files summarised), parsed by
canvas.diff_view and coloured by canvas.highlight on the server: the page's CSP allows no
inline code, and the browser only adds comments. Callers check access first (VIEW to read,
ACT to send).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from django.utils.safestring import SafeString

from common.errors import InvalidInput, ServiceError
from conversations.models import Conversation
from orchestration.services import conversation_post_message

from . import diff_view, workspace_reads
from .diff_view import Side
from .highlight import highlighted_lines
from .review_message import (
    MAX_NOTE_CHARS,
    CitedComment,
    ReviewComment,
    citation,
    parse_comments,
    review_message,
)

Mode = Literal["split", "unified"]
MODES: tuple[Mode, ...] = ("split", "unified")
MAX_REVIEW_FILES = 60
"""Files shown on one page; each costs one reading of the workspace. The rest are listed."""
_SIGNS = {"ctx": " ", "add": "+", "del": "-"}


@dataclass(frozen=True, slots=True)
class Cell:
    """One side of a line: its number, what a comment on it cites, its coloured text."""

    kind: str
    """ctx, add or del: a CSS class."""
    number: int
    side: Side
    """The file a comment's line number counts in."""
    html: SafeString | str


@dataclass(frozen=True, slots=True)
class Row:
    """A unified row (`cell` with both numbers) or a split row (`old`, `new`, either blank)."""

    old_number: int | None = None
    new_number: int | None = None
    cell: Cell | None = None
    old: Cell | None = None
    new: Cell | None = None


@dataclass(frozen=True, slots=True)
class ReviewHunk:
    header: str
    section: str
    rows: list[Row]


@dataclass(frozen=True, slots=True)
class ReviewFile:
    path: str
    status: str
    added: int | None
    removed: int | None
    summary: str | None = None
    """Why no lines are shown (a binary or large file, or a refusal)."""
    hunks: list[ReviewHunk] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Review:
    files: list[ReviewFile]
    not_shown: list[str]
    """Paths past MAX_REVIEW_FILES."""
    refusal: str | None = None


def review_read(conversation: Conversation, mode: Mode) -> Review:
    """Every changed file with its hunks laid out for `mode`. A workspace that cannot be read
    gives a refusal; one file that cannot (gone since listed) gives that file a summary."""
    try:
        changes = workspace_reads.changes(conversation)
    except ServiceError as exc:
        return Review([], [], exc.detail)
    files = []
    for change in changes[:MAX_REVIEW_FILES]:
        try:
            found = workspace_reads.diff(conversation, change.path)
        except ServiceError as exc:
            files.append(ReviewFile(change.path, change.status, None, None, exc.detail))
            continue
        parsed = diff_view.parse(found.text)
        if found.summary or not parsed or not parsed[0].hunks:
            summary = found.summary or "no lines to show"
            files.append(ReviewFile(change.path, change.status, None, None, summary))
            continue
        one = parsed[0]
        hunks = [_hunk(change.path, hunk, mode) for hunk in one.hunks]
        files.append(ReviewFile(change.path, change.status, one.added, one.removed, None, hunks))
    return Review(files, [c.path for c in changes[MAX_REVIEW_FILES:]])


def _hunk(path: str, hunk: diff_view.Hunk, mode: Mode) -> ReviewHunk:
    # Each side is coloured as one text, so a string or comment spanning lines keeps its colour.
    old_lines = [line for line in hunk.lines if line.kind != "add"]
    new_lines = [line for line in hunk.lines if line.kind != "del"]
    html: dict[tuple[Side, int | None], SafeString | str] = {}
    for side, lines in (("old", old_lines), ("new", new_lines)):
        coloured = highlighted_lines(path, [line.text for line in lines])
        html.update({(side, ln.number(side)): t for ln, t in zip(lines, coloured, strict=True)})

    def cell(line: diff_view.Line, side: Side) -> Cell:
        number = line.number(side)
        return Cell(line.kind, number, side, html[side, number])

    if mode == "unified":
        rows = [
            Row(line.old, line.new, cell(line, "old" if line.kind == "del" else "new"))
            for line in hunk.lines
        ]
    else:
        rows = [
            Row(
                old=cell(pair.old, "old") if pair.old else None,
                new=cell(pair.new, "new") if pair.new else None,
            )
            for pair in diff_view.split_rows(hunk)
        ]
    return ReviewHunk(hunk.header, hunk.section, rows)


def review_post(*, conversation: Conversation, sender, comments: str, note: str = "") -> int:
    """Send the review: check the comments (the JSON the page posts), find each one's lines in
    the file's diff as it is now, and post the message. Returns its seq. InvalidInput when a
    comment names a file without a diff or lines the diff does not hold (the agent changed it
    since the page was read: reload)."""
    if len(note) > MAX_NOTE_CHARS:
        raise InvalidInput(f"the general comment is longer than {MAX_NOTE_CHARS} characters.")
    parsed = parse_comments(comments)
    diffs: dict[str, diff_view.FileDiff | None] = {}
    cited = []
    for comment in parsed:
        if comment.path not in diffs:
            found = workspace_reads.diff(conversation, comment.path)
            files = diff_view.parse(found.text) if not found.summary else []
            diffs[comment.path] = files[0] if files else None
        cited.append(CitedComment(comment, _code(diffs[comment.path], comment)))
    text = review_message(cited, note)
    return conversation_post_message(conversation_id=conversation.pk, text=text, sender=sender)


def _code(diff: diff_view.FileDiff | None, comment: ReviewComment) -> list[str]:
    """The diff's lines a comment covers, signed; InvalidInput unless its first and last line
    are in the diff on its side."""
    if diff is None:
        raise InvalidInput(f"{comment.path} has no lines to comment on (a binary or large file).")
    numbered = {}
    for hunk in diff.hunks:
        for line in hunk.lines:
            number = line.number(comment.side)
            if number is not None:
                numbered[number] = f"{_SIGNS[line.kind]}{line.text}"
    for number in (comment.start, comment.end):
        if number not in numbered:
            raise InvalidInput(
                f"{citation(comment)}: line {number} is not in the diff now; "
                "reload the review to see the changes as they are."
            )
    return [numbered[n] for n in range(comment.start, comment.end + 1) if n in numbered]
