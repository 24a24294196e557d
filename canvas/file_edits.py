"""A file_editor call as a person reads it: the operation, the path and a diff of the change.

Shared by the stream's tool-call cards and the approval cards, so an edit reads the same
before and after it is approved. Pure; nothing here marks text safe.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

FILE_EDITOR = "file_editor"


@dataclass(frozen=True, slots=True)
class DiffLine:
    sign: str
    """"+" added, "-" removed, " " unchanged, "@" a hunk header (unified diffs)."""
    text: str


@dataclass(frozen=True, slots=True)
class FileEdit:
    operation: str
    """create, str_replace, insert, view, ..."""
    path: str
    diff: list[DiffLine] = field(default_factory=list)
    """str_replace: old lines against new; insert: the inserted lines."""
    insert_line: int | None = None
    file_text: str | None = None
    """create: the whole new file."""
    shown: frozenset[str] = frozenset()
    """The argument names this view shows (the rest are listed as they are)."""


def text_of(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)


def line_diff(old: str, new: str) -> list[DiffLine]:
    """A line diff of a replacement: unchanged lines kept for context, in file order."""
    lines = []
    for line in difflib.ndiff(old.splitlines(), new.splitlines()):
        if line[:1] in {"+", "-", " "}:
            lines.append(DiffLine(line[0], line[2:]))
    return lines


MAX_DIFF_LINES = 400
"""Lines of one unified diff shown; an agent rewriting a generated file should not make the
page megabytes long (the Changes panel has the whole diff)."""


def unified_diff(old: str | None, new: str) -> tuple[list[DiffLine], int]:
    """A whole-file change as unified-diff lines (hunk headers as sign "@"), at most
    MAX_DIFF_LINES of them, and how many more there were. `old` None: a new file."""
    if old is None:
        lines = [DiffLine("+", line) for line in new.splitlines()]
    else:
        raw = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=3))
        # The first two lines are the ---/+++ file headers; the template draws its own.
        lines = [
            DiffLine("@", line) if line.startswith("@@") else DiffLine(line[:1], line[1:])
            for line in raw[2:]
        ]
    return lines[:MAX_DIFF_LINES], max(len(lines) - MAX_DIFF_LINES, 0)


def file_edit(args: Mapping[str, Any]) -> FileEdit:
    """The edit a file_editor call's arguments describe."""
    operation = text_of(args.get("command") or "")
    path = text_of(args.get("path") or "")
    shown = {"command", "path"}
    extra: dict[str, Any] = {}
    if operation == "str_replace":
        extra["diff"] = line_diff(
            text_of(args.get("old_str") or ""), text_of(args.get("new_str") or "")
        )
        shown |= {"old_str", "new_str"}
    elif operation == "insert" and isinstance(args.get("new_str"), str):
        extra["diff"] = [DiffLine("+", line) for line in args["new_str"].splitlines()]
        if isinstance(args.get("insert_line"), int):
            extra["insert_line"] = args["insert_line"]
        shown |= {"new_str", "insert_line"}
    elif operation == "create" and isinstance(args.get("file_text"), str):
        extra["file_text"] = args["file_text"]
        shown.add("file_text")
    return FileEdit(operation=operation, path=path, shown=frozenset(shown), **extra)
