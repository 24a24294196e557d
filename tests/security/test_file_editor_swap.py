"""Issue 23: the file editor runs in the worker, outside the sandbox, while a command in a
conversation sharing the folder trades `d` for a link to another team's workspace in a loop
(tests/security/swapper.py). No view may show the other team's file, no create may land in
their folder, and every call ends in the right result or a clear error, never an exception.

On 34cf807 (realpath, then open by name) this failed: views returned the other team's file and
creates landed in its folder.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestration.tools.base import ToolContext
from orchestration.tools.file_editor import FileEditorArgs, FileEditorTool
from tests.security.swapper import deadline, make_trap, swapping
from workspaces.local import LocalWorkspace

TRIES = 1000
MARKER = "OTHER-TEAM-SECRET-4f1c"
INSIDE = "our own file\n"
REFUSED = ("is a symbolic link; links are not followed", "does not exist")
RACE_SECONDS = 30.0


def attempts(outcomes: Counter[str]) -> Iterator[int]:
    """TRIES attempts, then more (until a deadline) while `outcomes` lacks an inside result
    ("ok") or a refusal: proof that the race went both ways, even on a loaded machine where
    the swapper may sit still for a while."""
    end = deadline(RACE_SECONDS)
    i = 0
    while i < TRIES or (
        min(outcomes["ok"], outcomes["refused"]) == 0 and time.monotonic() < end
    ):  # fmt: skip
        yield i
        i += 1


@pytest.fixture
def trap(tmp_path: Path) -> tuple[LocalWorkspace, Path, Path, Path]:
    """(workspace, outside, d, its swap partner): `outside` stands for another team's folder,
    holding a file of the same relative name as ours."""
    ws = LocalWorkspace(tmp_path / "team-1" / "ws", tmp_path / "state")
    outside = tmp_path / "team-2" / "ws"
    outside.mkdir(parents=True)
    (outside / "file").write_text(f"{MARKER}\n")
    folder, link = make_trap(ws.root, outside)
    (folder / "file").write_text(INSIDE)
    return ws, outside, folder, link


def run(ws: LocalWorkspace, command: str, path: str, **kwargs: str) -> tuple[str, str]:
    """(outcome, content): outcome is ok, refused, or what went wrong."""
    args = FileEditorArgs(command=command, path=path, **kwargs)
    try:
        result = FileEditorTool().run(args, ToolContext(conversation_id="c1", workspace=ws))
    except Exception as exc:  # noqa: BLE001 - counted: none may escape
        return f"escaped {type(exc).__name__}", str(exc)
    if MARKER in result.content:
        return "leaked", result.content
    if not result.is_error:
        return "ok", result.content
    return ("refused" if any(r in result.content for r in REFUSED) else "unclear"), result.content


def test_views_never_show_another_teams_file(trap) -> None:
    ws, outside, folder, link = trap
    outcomes: Counter[str] = Counter()
    odd: list[str] = []
    with swapping(folder, link):
        for _ in attempts(outcomes):
            outcome, content = run(ws, "view", "d/file")
            outcomes[outcome] += 1
            if outcome == "ok" and "our own file" not in content:
                outcomes["wrong content"] += 1
            if outcome not in ("ok", "refused"):
                odd.append(content)
    assert set(outcomes) <= {"ok", "refused"}, (outcomes, odd[:3])
    assert outcomes["ok"] > 0 and outcomes["refused"] > 0, outcomes  # the race really ran
    assert (outside / "file").read_text() == f"{MARKER}\n"


def test_creates_never_land_in_another_teams_folder(trap) -> None:
    ws, outside, folder, link = trap
    outcomes: Counter[str] = Counter()
    odd: list[str] = []
    created: list[str] = []
    with swapping(folder, link):
        for i in attempts(outcomes):
            outcome, content = run(ws, "create", f"d/new-{i}", file_text=f"new {i}\n")
            outcomes[outcome] += 1
            if outcome == "ok":
                created.append(f"new-{i}")
            elif outcome != "refused":
                odd.append(content)
    assert sorted(p.name for p in outside.iterdir()) == ["file"]
    assert set(outcomes) <= {"ok", "refused"}, (outcomes, odd[:3])
    assert outcomes["ok"] > 0 and outcomes["refused"] > 0, outcomes
    assert folder.resolve() == folder and not folder.is_symlink()  # the swapper put it back
    for name in created:  # every create that answered "Created" is in our folder
        assert (folder / name).read_text() == f"new {name.removeprefix('new-')}\n"
    assert sorted(p.name for p in folder.iterdir()) == sorted([*created, "file"])


def test_paths_relative_to_a_swapped_cwd_stay_inside(trap) -> None:
    """The terminal's saved cwd is `d`: a relative path is read against it from its text,
    never through the link swapped in for it."""
    ws, outside, folder, link = trap
    (ws.state_dir / "cwd").write_text(str(folder))
    outcomes: Counter[str] = Counter()
    odd: list[str] = []
    with swapping(folder, link):
        for i in attempts(outcomes):
            command = ("view", "create")[i % 2]
            outcome, content = run(ws, command, "file" if i % 2 == 0 else f"rel-{i}", file_text="x")
            outcomes[outcome] += 1
            if outcome not in ("ok", "refused"):
                odd.append(content)
    assert set(outcomes) <= {"ok", "refused"}, (outcomes, odd[:3])
    assert outcomes["ok"] > 0 and outcomes["refused"] > 0, outcomes
    assert sorted(p.name for p in outside.iterdir()) == ["file"]
