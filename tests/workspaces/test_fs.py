"""workspaces.fs: reads and writes by directory handle, never through a link."""

from __future__ import annotations

import contextlib
import os
import stat
import time
from pathlib import Path

import pytest

from tests.security.swapper import deadline, make_trap, swapping
from workspaces import fs
from workspaces.base import WorkspacePathError

MARK = b"ANOTHER-TEAMS-FILE"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """Another team's folder: what a link planted in the workspace points at."""
    other = tmp_path / "other-team"
    other.mkdir()
    (other / "file").write_bytes(MARK)
    return other


def test_a_file_round_trips_and_keeps_its_mode(ws: Path) -> None:
    fs.write_bytes(ws, ["a", "b.txt"], b"one", make_parents=True)
    os.chmod(ws / "a" / "b.txt", 0o750)
    fs.write_bytes(ws, ["a", "b.txt"], b"two")
    assert fs.read_bytes(ws, ["a", "b.txt"], limit=100) == b"two"
    assert stat.S_IMODE((ws / "a" / "b.txt").stat().st_mode) == 0o750
    assert [p.name for p in (ws / "a").iterdir()] == ["b.txt"]  # no temporary file left


def test_a_new_file_gets_the_usual_mode(ws: Path) -> None:
    fs.write_bytes(ws, ["new"], b"x")
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE((ws / "new").stat().st_mode) == 0o666 & ~umask


def test_exclusive_refuses_anything_by_that_name_even_a_dangling_link(ws: Path) -> None:
    (ws / "there").write_text("x")
    (ws / "dangling").symlink_to(ws / "nowhere")
    with pytest.raises(FileExistsError):
        fs.write_bytes(ws, ["there"], b"y", exclusive=True)
    with pytest.raises((FileExistsError, WorkspacePathError)):
        fs.write_bytes(ws, ["dangling"], b"y", exclusive=True)
    assert not (ws / "nowhere").exists()


@pytest.mark.parametrize("where", [["link", "file"], ["link"]])
def test_links_are_refused_on_the_way_and_at_the_end(ws: Path, outside: Path, where) -> None:
    (ws / "link").symlink_to(outside / "file" if len(where) == 1 else outside)
    with pytest.raises(WorkspacePathError, match="symbolic link"):
        fs.read_bytes(ws, where, limit=100)
    with pytest.raises(WorkspacePathError, match="symbolic link"):
        fs.write_bytes(ws, where, b"overwritten")
    assert (outside / "file").read_bytes() == MARK


def test_a_hard_link_is_replaced_not_written_through(ws: Path, outside: Path) -> None:
    os.link(outside / "file", ws / "hard")
    fs.write_bytes(ws, ["hard"], b"mine")
    assert (outside / "file").read_bytes() == MARK
    assert (ws / "hard").read_bytes() == b"mine"


def test_a_fifo_is_refused_without_hanging(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    with pytest.raises(WorkspacePathError, match="not a regular file"):
        fs.read_bytes(ws, ["pipe"], limit=100)


def test_a_file_over_the_limit_is_refused(ws: Path) -> None:
    (ws / "big").write_bytes(b"x" * 101)
    with pytest.raises(fs.FileTooLarge) as raised:
        fs.read_bytes(ws, ["big"], limit=100)
    assert raised.value.size == 101


def test_unlink_removes_a_link_never_its_target(ws: Path, outside: Path) -> None:
    (ws / "link").symlink_to(outside / "file")
    fs.unlink(ws, ["link"])
    assert not (ws / "link").is_symlink() and (outside / "file").read_bytes() == MARK


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../x", "a\0b"])
def test_paths_that_could_leave_are_refused(ws: Path, path: str) -> None:
    with pytest.raises(WorkspacePathError):
        fs.read_bytes(ws, fs.parts_of(path), limit=10)


def test_relative_parts_are_worked_out_from_the_text(ws: Path) -> None:
    assert fs.relative_parts(ws, "a/./b/../c") == ["a", "c"]
    assert fs.relative_parts(ws, str(ws / "x" / "y")) == ["x", "y"]
    assert fs.relative_parts(ws, "z", cwd=ws / "sub") == ["sub", "z"]
    assert fs.relative_parts(ws, str(ws)) == []
    for escape in ("..", "../x", "/etc", str(ws) + "-sibling/x"):
        with pytest.raises(WorkspacePathError, match="outside the workspace"):
            fs.relative_parts(ws, escape)


def test_lstat_names_what_is_there_without_following(ws: Path, outside: Path) -> None:
    (ws / "link").symlink_to(outside)
    info = fs.lstat(ws, ["link"])
    assert info is not None and stat.S_ISLNK(info.st_mode)
    assert fs.lstat(ws, ["missing"]) is None


def test_a_folder_swapped_for_a_link_is_never_read_or_written_through(
    ws: Path, outside: Path
) -> None:
    """The race of issue 23: a command trades `d` and a link to another team's folder while
    the host reads and writes `d/...`; each try succeeds inside or is refused, nothing else."""
    folder, link = make_trap(ws, outside)
    (folder / "file").write_bytes(b"mine")
    outcomes: dict[str, int] = {}
    tries = 0
    with swapping(folder, link):
        # 1,000 tries, then on until the race was seen both ways (a loaded machine may
        # schedule the swapper so that one side dominates for a while).
        until = deadline(30)
        while tries < 1000 or (len(outcomes) < 2 and time.monotonic() < until):
            try:
                data = fs.read_bytes(ws, ["d", "file"], limit=100)
                assert data != MARK
                outcome = "read"
            except (WorkspacePathError, FileNotFoundError) as exc:
                outcome = type(exc).__name__
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            with contextlib.suppress(WorkspacePathError, FileNotFoundError):
                fs.write_bytes(ws, ["d", f"new-{tries}"], b"mine", exclusive=True)
            tries += 1
    assert sorted(p.name for p in outside.iterdir()) == ["file"]
    assert (outside / "file").read_bytes() == MARK
    assert outcomes.get("read", 0) > 0 and len(outcomes) >= 2, outcomes
