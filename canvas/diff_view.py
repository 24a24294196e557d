"""Unified diffs (git's, or `diff -u`'s) read into files, hunks and numbered lines, and a hunk's
lines paired side by side for the split view. Pure: no Django, no ORM, no highlighting.

A file starts at `diff --git` (or, in a plain diff, at a `---` line followed by `+++`); inside
a hunk the header's counts say how many lines belong to it, so a removed line reading
`-- x` or an added `++ y` is never mistaken for a file header. Paths come from `---` / `+++`,
then `rename from` / `to`, then the `diff --git` line; git's C-quoted names ("a/t\\303\\251")
are unquoted. A binary file has no hunks and `binary=True`. Lines a header did not announce
(a truncated diff) are dropped rather than guessed at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

LineKind = Literal["ctx", "add", "del"]
FileStatus = Literal["added", "modified", "deleted", "renamed", "copied"]
Side = Literal["old", "new"]
"""Which file a line number counts in: the file before the change or as it is now."""

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)$")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
NO_NEWLINE = "\\ No newline at end of file"


@dataclass(frozen=True, slots=True)
class Line:
    kind: LineKind
    text: str
    """The line without its +/-/space sign and newline."""
    old: int | None
    """Its number in the old file; None for an added line."""
    new: int | None
    """Its number in the new file; None for a removed line."""
    no_newline: bool = False
    """The file ends here without a newline."""

    def number(self, side: Side) -> int | None:
        return self.old if side == "old" else self.new


@dataclass(frozen=True, slots=True)
class Hunk:
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    section: str
    """What git printed after the second @@ (the enclosing function, often empty)."""
    lines: list[Line] = field(default_factory=list)

    @property
    def header(self) -> str:
        return f"@@ -{self.old_start},{self.old_count} +{self.new_start},{self.new_count} @@"


@dataclass(frozen=True, slots=True)
class FileDiff:
    old_path: str | None
    """None for an added file."""
    new_path: str | None
    """None for a deleted file."""
    status: FileStatus
    binary: bool = False
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    @property
    def added(self) -> int:
        return sum(1 for h in self.hunks for line in h.lines if line.kind == "add")

    @property
    def removed(self) -> int:
        return sum(1 for h in self.hunks for line in h.lines if line.kind == "del")


@dataclass(frozen=True, slots=True)
class SplitRow:
    """One row of the split view: the old side's line and the new side's (None: blank)."""

    old: Line | None
    new: Line | None


def split_rows(hunk: Hunk) -> list[SplitRow]:
    """A hunk side by side: context on both sides; a run of removed lines next to the run of
    added lines that follows it, paired in order, the longer run's rest against blanks."""
    rows: list[SplitRow] = []
    dels: list[Line] = []
    adds: list[Line] = []

    def flush() -> None:
        for i in range(max(len(dels), len(adds))):
            rows.append(
                SplitRow(dels[i] if i < len(dels) else None, adds[i] if i < len(adds) else None)
            )
        dels.clear()
        adds.clear()

    for line in hunk.lines:
        if line.kind == "ctx":
            flush()
            rows.append(SplitRow(line, line))
        elif line.kind == "del":
            if adds:  # a removal after additions starts a new pair of runs
                flush()
            dels.append(line)
        else:
            adds.append(line)
    flush()
    return rows


def unquote(name: str) -> str:
    """git's C-style quoted path ("\\"a\\\\tb\\"", octal bytes for UTF-8) as text; a name
    without quotes as it is."""
    if len(name) < 2 or not (name[0] == name[-1] == '"'):
        return name
    out = bytearray()
    body, i = name[1:-1], 0
    while i < len(body):
        char = body[i]
        if char != "\\" or i + 1 == len(body):
            out += char.encode()
            i += 1
        elif body[i + 1] in "01234567":
            out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
            i += 4
        else:
            out.append(_ESCAPES.get(body[i + 1], ord(body[i + 1])))
            i += 2
    return out.decode("utf-8", "replace")


def _side_path(value: str) -> str | None:
    """The path of a `---` / `+++` line's value: None for /dev/null, without a/ or b/."""
    value = value.split("\t", 1)[0] if not value.startswith('"') else value
    value = unquote(value.rstrip("\n"))
    if value == "/dev/null":
        return None
    return value[2:] if value[:2] in ("a/", "b/") else value


def _git_paths(rest: str) -> tuple[str, str]:
    """The two paths of `diff --git a/X b/Y` (either may be quoted). With spaces in names the
    split is ambiguous; X == Y, the usual case, is found exactly."""
    if rest.startswith('"'):
        end = rest.index('"', 1)
        while rest[end - 1] == "\\":
            end = rest.index('"', end + 1)
        first, second = rest[: end + 1], rest[end + 2 :]
    elif rest.endswith('"'):
        start = rest.rindex(' "')
        first, second = rest[:start], rest[start + 1 :]
    else:
        half = (len(rest) - 1) // 2
        if rest[half] == " " and rest[2:half] == rest[half + 3 :]:
            first, second = rest[:half], rest[half + 1 :]
        else:
            first, _, tail = rest.partition(" b/")
            second = "b/" + tail
    return _side_path(first) or "", _side_path(second) or ""


@dataclass(slots=True)
class _File:
    old_path: str | None = None
    new_path: str | None = None
    status: FileStatus = "modified"
    binary: bool = False
    hunks: list[Hunk] = field(default_factory=list)

    def done(self) -> FileDiff:
        status = self.status
        if status == "modified" and self.old_path is None:
            status = "added"
        elif status == "modified" and self.new_path is None:
            status = "deleted"
        old = None if status == "added" else self.old_path
        new = None if status == "deleted" else self.new_path
        return FileDiff(old, new, status, self.binary, self.hunks)


def parse(text: str) -> list[FileDiff]:
    """Every file of a unified diff, in order."""
    files: list[FileDiff] = []
    current: _File | None = None
    # Only "\n" ends a line: str.splitlines would also cut at a form feed or U+2028 inside one.
    lines = text.removesuffix("\n").split("\n") if text else []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith("diff --git "):
            if current is not None:
                files.append(current.done())
            old, new = _git_paths(line[len("diff --git ") :])
            current = _File(old, new)
        elif line.startswith("--- ") and i < len(lines) and lines[i].startswith("+++ "):
            if current is None or current.hunks:  # a plain diff's next file
                if current is not None:
                    files.append(current.done())
                current = _File()
            current.old_path = _side_path(line[4:])
            current.new_path = _side_path(lines[i][4:])
            i += 1
        elif current is None:
            continue
        elif match := _HUNK.match(line):
            hunk = _hunk(match)
            i = _read_hunk(lines, i, hunk)
            current.hunks.append(hunk)
        else:
            _header(current, line)
    if current is not None:
        files.append(current.done())
    return files


def _header(current: _File, line: str) -> None:
    if line.startswith("new file mode"):
        current.status, current.old_path = "added", None
    elif line.startswith("deleted file mode"):
        current.status, current.new_path = "deleted", None
    elif line.startswith(("rename from ", "copy from ")):
        current.status = "renamed" if line.startswith("rename") else "copied"
        current.old_path = unquote(line.split(" ", 2)[2])
    elif line.startswith(("rename to ", "copy to ")):
        current.new_path = unquote(line.split(" ", 2)[2])
    elif line.startswith("Binary files ") or line == "GIT binary patch":
        current.binary = True


def _hunk(match: re.Match[str]) -> Hunk:
    old_start, old_count, new_start, new_count, section = match.groups()
    return Hunk(
        int(old_start),
        1 if old_count is None else int(old_count),
        int(new_start),
        1 if new_count is None else int(new_count),
        section.strip(),
    )


def _read_hunk(lines: list[str], i: int, hunk: Hunk) -> int:
    """Read the hunk's lines from `lines[i]` on into `hunk`; the index after them."""
    old, new = hunk.old_start, hunk.new_start
    old_left, new_left = hunk.old_count, hunk.new_count
    while i < len(lines) and (old_left > 0 or new_left > 0 or lines[i] == NO_NEWLINE):
        line = lines[i]
        sign, text = line[:1], line[1:]
        if line == NO_NEWLINE:
            if hunk.lines:
                last = hunk.lines[-1]
                hunk.lines[-1] = Line(last.kind, last.text, last.old, last.new, no_newline=True)
        elif sign in (" ", "") and old_left > 0 and new_left > 0:  # "" : an empty context line
            hunk.lines.append(Line("ctx", text, old, new))
            old, new, old_left, new_left = old + 1, new + 1, old_left - 1, new_left - 1
        elif sign == "-" and old_left > 0:
            hunk.lines.append(Line("del", text, old, None))
            old, old_left = old + 1, old_left - 1
        elif sign == "+" and new_left > 0:
            hunk.lines.append(Line("add", text, None, new))
            new, new_left = new + 1, new_left - 1
        else:
            break  # not what the header announced: the diff was cut
        i += 1
    return i
