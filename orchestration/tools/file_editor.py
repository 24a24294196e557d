"""The file editor tool: view, create and precisely edit text files in the workspace.

Edits are exact string replacements or line inserts, so the model states what it expects to
be there and a stale picture of the file fails loudly instead of corrupting it. The content
before each edit is kept in the workspace's state directory, so `undo_edit` works in whichever
process runs the next step.

This runs in the worker, outside the sandbox, while the agent's commands may change the
workspace at any moment (swap a folder for a link between two system calls). So every file and
folder is opened by handle through the workspace and workspaces.fs: a symbolic link anywhere
in a path is refused, never followed, and a race ends in that refusal or a not-found result,
never in a read or write outside the workspace.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from orchestration.tools.base import ToolArgs, ToolContext, ToolResult
from workspaces import fs
from workspaces.base import DirEntry, Workspace, WorkspacePathError

MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_VIEW_CHARS = 30_000
MAX_DIR_ENTRIES = 1000
MAX_UNDO_STEPS = 10
SNIPPET_CONTEXT_LINES = 4


class FileEditorArgs(ToolArgs):
    command: Literal["view", "create", "str_replace", "insert", "undo_edit"] = Field(
        description="The operation to perform."
    )
    path: str = Field(
        description=(
            "File or directory to act on: absolute, or relative to the terminal's current "
            "directory. Must be inside the workspace."
        )
    )
    file_text: str | None = Field(
        default=None, description="`create` only: the full content of the new file."
    )
    old_str: str | None = Field(
        default=None,
        description=(
            "`str_replace` only: the exact text to replace, including whitespace and "
            "indentation. It must occur exactly once in the file; add surrounding lines to make "
            "it unique."
        ),
    )
    new_str: str | None = Field(
        default=None,
        description=(
            "`str_replace`: the replacement text (omit to delete old_str). "
            "`insert`: the lines to insert."
        ),
    )
    insert_line: int | None = Field(
        default=None,
        ge=0,
        description="`insert` only: new_str goes after this line number (0 inserts at the top).",
    )
    view_range: list[int] | None = Field(
        default=None,
        min_length=2,
        max_length=2,
        description=(
            "`view` of a file only: [start, end] line numbers, 1-based and inclusive; end -1 "
            "means to the end of the file. Omit to view the whole file."
        ),
    )


class _EditError(Exception):
    """A problem to report back to the model as an error result."""


@dataclass(frozen=True, slots=True)
class _Target:
    """The file or folder a call acts on: `path` to show, `parts` to open it by."""

    ws: Workspace
    path: Path
    parts: list[str]

    @property
    def relative(self) -> str:
        return "/".join(self.parts)


class FileEditorTool:
    name: ClassVar[str] = "file_editor"
    description: ClassVar[str] = (
        "View, create and edit text files in the workspace.\n"
        "- `view`: a file is shown with line numbers (`view_range` picks lines); a directory "
        "lists its non-hidden entries two levels deep, directories ending in '/'.\n"
        "- `create`: write a new file from `file_text` (parent directories are created). Fails "
        "if the file exists; change existing files with `str_replace` or `insert`.\n"
        "- `str_replace`: replace `old_str`, which must match exactly once (whitespace "
        "included), with `new_str`. View the file first and copy the text exactly, without the "
        "line number prefixes.\n"
        "- `insert`: insert `new_str` after line `insert_line` (0 = top of the file).\n"
        "- `undo_edit`: revert the last create/str_replace/insert of `path`; repeat to step "
        "further back.\n"
        "Each edit answers with the changed lines; check them. Binary files and files over "
        f"{MAX_FILE_BYTES // (1024 * 1024)} MB cannot be opened: use the terminal for those.\n"
        "Symbolic links are never followed: a path that passes through a link, or names one, "
        "is refused; use the terminal to work with links."
    )
    args_model: ClassVar[type[ToolArgs]] = FileEditorArgs
    read_only: ClassVar[bool] = False

    def run(self, args: FileEditorArgs, ctx: ToolContext) -> ToolResult:
        handler = _COMMANDS[args.command]
        ws = ctx.workspace
        shown = ws.as_agent_sees  # a container's agent knows its files at /workspace
        try:
            parts = ws.parts(args.path)
        except WorkspacePathError as exc:
            return ToolResult(content=shown(str(exc)), is_error=True)
        target = _Target(ws, ws.root.joinpath(*parts), parts)
        try:
            return ToolResult(content=shown(handler(args, target)))
        except _EditError as exc:
            message = str(exc)
        except WorkspacePathError as exc:  # a link on the way (perhaps swapped in just now)
            message = f"{target.path}: {exc}"
        except OSError as exc:  # changed under us by a command running alongside
            message = f"{target.path}: {exc.strerror or exc}"
        return ToolResult(content=shown(message), is_error=True)


# -- commands: each returns the text the model sees or raises _EditError -------------------------


def _view(args: FileEditorArgs, t: _Target) -> str:
    try:
        data = _read_bytes(t)
    except IsADirectoryError:
        return _list_dir(t)
    lines = _lines(_decode(t, data))
    if not lines:
        return f"{t.path} is empty."
    start, end = 1, len(lines)
    if args.view_range is not None:
        start, end = args.view_range
        if not 1 <= start <= len(lines):
            raise _EditError(
                f"view_range start {start} is outside the file, which has {len(lines)} lines."
            )
        if end == -1 or end > len(lines):
            end = len(lines)
        elif end < start:
            raise _EditError(f"view_range end {end} is before its start {start}.")
    return f"{t.path} (lines {start}-{end} of {len(lines)}):\n" + _numbered(lines, start, end)


def _create(args: FileEditorArgs, t: _Target) -> str:
    if args.file_text is None:
        raise _EditError("`create` needs `file_text`, the content of the new file.")
    try:
        t.ws.write_text(str(t.path), args.file_text, exclusive=True)
    except (FileExistsError, IsADirectoryError):
        raise _EditError(
            f"{t.path} already exists; `create` never overwrites. Change it with `str_replace` "
            "or `insert` (use `view` to see it first)."
        ) from None
    _push_history(t, None)
    return f"Created {t.path} ({len(_lines(args.file_text))} lines)."


def _str_replace(args: FileEditorArgs, t: _Target) -> str:
    old, new = args.old_str, args.new_str or ""
    if not old:
        raise _EditError("`str_replace` needs a non-empty `old_str`, the exact text to replace.")
    text = _read(t)
    positions = _find_all(text, old)
    if not positions:
        raise _EditError(
            f"No replacement was made: old_str was not found verbatim in {t.path}. Check "
            "whitespace and indentation, or `view` the file to copy the exact text."
        )
    if len(positions) > 1:
        lines = sorted({text.count("\n", 0, i) + 1 for i in positions})
        raise _EditError(
            f"No replacement was made: old_str occurs {len(positions)} times in {t.path}, at "
            f"lines {', '.join(map(str, lines))}. Include more surrounding text to make it unique."
        )
    at = positions[0]
    updated = text[:at] + new + text[at + len(old) :]
    _write(t, text, updated)
    first = text.count("\n", 0, at) + 1
    return _edited(t.path, updated, first, first + new.count("\n"))


def _insert(args: FileEditorArgs, t: _Target) -> str:
    if args.insert_line is None or args.new_str is None:
        raise _EditError("`insert` needs both `insert_line` and `new_str`.")
    text = _read(t)
    line_count = len(_lines(text))
    after = args.insert_line
    if not 0 <= after <= line_count:
        raise _EditError(
            f"insert_line {after} is out of range: the file has {line_count} lines, so use a "
            f"number from 0 to {line_count}."
        )
    block = args.new_str if args.new_str.endswith("\n") else args.new_str + "\n"
    offset = _line_end_offset(text, after)
    if offset == len(text) and text and not text.endswith("\n"):
        # Appending after a last line that has no newline: keep the file's missing final newline.
        block = "\n" + block[:-1]
    updated = text[:offset] + block + text[offset:]
    _write(t, text, updated)
    return _edited(t.path, updated, after + 1, after + max(1, len(_lines(args.new_str))))


def _undo_edit(args: FileEditorArgs, t: _Target) -> str:
    history = _load_history(t)
    if not history:
        raise _EditError(f"There is no edit of {t.path} to undo.")
    previous = history.pop()
    if previous is None:
        with contextlib.suppress(FileNotFoundError):
            fs.unlink(t.ws.root, t.parts)  # the name itself, a link included: never its target
        message = f"Undid the creation of {t.path}; the file no longer exists."
    else:
        t.ws.write_text(str(t.path), previous)
        lines = _lines(previous)
        message = f"Undid the last edit of {t.path}. It now reads:\n" + _numbered(
            lines, 1, len(lines)
        )
    _save_history(t, history)
    return message


_COMMANDS: dict[str, Callable[[FileEditorArgs, _Target], str]] = {
    "view": _view,
    "create": _create,
    "str_replace": _str_replace,
    "insert": _insert,
    "undo_edit": _undo_edit,
}


# -- helpers -----------------------------------------------------------------------------------


def _read(t: _Target) -> str:
    try:
        data = _read_bytes(t)
    except IsADirectoryError:
        raise _EditError(f"{t.path} is a directory; only `view` works on directories.") from None
    return _decode(t, data)


def _read_bytes(t: _Target) -> bytes:
    """The file's bytes, opened by handle; IsADirectoryError for a folder."""
    try:
        return fs.read_bytes(t.ws.root, t.parts, limit=MAX_FILE_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        raise _EditError(f"{t.path} does not exist.") from None
    except fs.FileTooLarge:
        raise _EditError(
            f"{t.path} is too large to open here; use the terminal (head, grep, sed)."
        ) from None


def _decode(t: _Target, data: bytes) -> str:
    """Strict UTF-8 with line endings as on disk; binary files are refused."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = "\0"
    if "\0" in text:
        raise _EditError(f"{t.path} is not a UTF-8 text file (binary?); use the terminal instead.")
    return text


def _write(t: _Target, before: str, after: str) -> None:
    t.ws.write_text(str(t.path), after)
    _push_history(t, before)


def _lines(text: str) -> list[str]:
    """Lines as the editor numbers them: split on '\\n', a final newline ends the last line."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _line_end_offset(text: str, line: int) -> int:
    """Offset just after line number `line` (0 = start of text)."""
    offset = 0
    for _ in range(line):
        newline = text.find("\n", offset)
        if newline == -1:
            return len(text)
        offset = newline + 1
    return offset


def _find_all(text: str, needle: str) -> list[int]:
    """Every start offset of needle, overlapping ones included (they are ambiguous too)."""
    found: list[int] = []
    at = text.find(needle)
    while at != -1:
        found.append(at)
        at = text.find(needle, at + 1)
    return found


def _numbered(lines: list[str], start: int, end: int) -> str:
    """`cat -n` style, stopping with a note once the output would get too long."""
    out: list[str] = []
    size = 0
    for number in range(start, end + 1):
        row = f"{number:6}\t{lines[number - 1].removesuffix(chr(13))}"
        size += len(row) + 1
        if size > MAX_VIEW_CHARS:
            out.append(f"[... output stopped at line {number - 1}; use view_range to see more]")
            break
        out.append(row)
    return "\n".join(out)


def _edited(path: Path, text: str, first: int, last: int) -> str:
    lines = _lines(text)
    low = max(1, first - SNIPPET_CONTEXT_LINES)
    high = min(len(lines), last + SNIPPET_CONTEXT_LINES)
    snippet = _numbered(lines, low, high) if lines else "(the file is now empty)"
    return (
        f"Edited {path}. The changed region now reads:\n{snippet}\n"
        "Check that this is what you intended; `undo_edit` reverts it."
    )


def _list_dir(t: _Target) -> str:
    """Two levels under the folder, by handle (Workspace.list_files): a link is listed as what
    it is and never entered; a subfolder swapped for a link meanwhile is listed empty."""
    entries: list[str] = []
    for child in _visible_children(t.ws, t.relative, top=True):
        is_dir = child.kind == "dir"
        entries.append(child.name + ("/" if is_dir else ""))
        if is_dir:
            inner = f"{t.relative}/{child.name}" if t.parts else child.name
            for grandchild in _visible_children(t.ws, inner, top=False):
                slash = "/" if grandchild.kind == "dir" else ""
                entries.append(f"{child.name}/{grandchild.name}{slash}")
    header = f"Files and directories up to 2 levels deep in {t.path}, hidden ones excluded:"
    if not entries:
        return f"{header}\n(empty)"
    if len(entries) > MAX_DIR_ENTRIES:
        left = len(entries) - MAX_DIR_ENTRIES
        entries = [*entries[:MAX_DIR_ENTRIES], f"[... {left} more entries not shown]"]
    return header + "\n" + "\n".join(entries)


def _visible_children(ws: Workspace, relative: str, *, top: bool) -> list[DirEntry]:
    """Non-hidden entries by name. An unreadable folder lists as empty; below the top, so does
    one that is gone or has become a link (the top one's link is the caller's error)."""
    try:
        found = ws.list_files(relative)
    except PermissionError:
        return []
    except (OSError, WorkspacePathError):
        if top:
            raise
        return []
    return sorted((e for e in found if not e.name.startswith(".")), key=lambda e: e.name)


def _history_file(t: _Target) -> Path:
    digest = hashlib.sha256(str(t.path).encode()).hexdigest()[:32]
    return t.ws.state_path(f"file-editor-history-{digest}.json")


def _load_history(t: _Target) -> list[str | None]:
    """Contents before each edit, oldest first; None means the edit created the file."""
    try:
        stored = json.loads(_history_file(t).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return list(stored.get("snapshots", [])) if stored.get("path") == str(t.path) else []


def _save_history(t: _Target, history: list[str | None]) -> None:
    target = _history_file(t)
    if not history:
        target.unlink(missing_ok=True)
        return
    payload = {"path": str(t.path), "snapshots": history[-MAX_UNDO_STEPS:]}
    target.write_text(json.dumps(payload), encoding="utf-8")


def _push_history(t: _Target, before: str | None) -> None:
    _save_history(t, [*_load_history(t), before])
