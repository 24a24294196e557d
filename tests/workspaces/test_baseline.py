"""The workspace's baseline and what changed since: real files, real git, the agent's commands
through the real sandbox."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from workspaces.base import FileChange, WorkspacePathError
from workspaces.baseline import BASELINE_DIR, MAX_DIFF_BYTES, TIDY_PACK_LIMIT
from workspaces.local import LocalWorkspace


def _write(ws: LocalWorkspace, path: str, text: str) -> None:
    target = ws.root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


@pytest.fixture
def started(ws: LocalWorkspace) -> LocalWorkspace:
    """A workspace with a few files, an ignored one among them, and its baseline taken."""
    _write(ws, "keep.txt", "same\n")
    _write(ws, "edit.py", "a = 1\nb = 2\nc = 3\n")
    _write(ws, "gone.txt", "one\ntwo\n")
    _write(ws, ".gitignore", "*.log\n")
    _write(ws, "build.log", "old log\n")
    assert ws.baseline_take() is True
    return ws


def test_baseline_lives_in_the_state_directory_out_of_the_sandbox(started: LocalWorkspace):
    assert (started.state_dir / BASELINE_DIR).is_dir()
    assert not (started.root / ".git").exists()
    assert started.baseline_take() is False  # taken once
    seen = started.run(f"ls -a; ls {started.state_dir / BASELINE_DIR} 2>&1", timeout=20)
    assert ".git" not in seen.output.split()
    assert "No such file or directory" in seen.output  # the sandbox does not mount it


def test_changes_list_added_modified_deleted_with_line_counts(started: LocalWorkspace):
    result = started.run(
        "printf 'a = 1\\nb = 20\\nc = 3\\nd = 4\\n' > edit.py && rm gone.txt"
        " && mkdir -p src && printf 'x\\ny\\n' > src/new.py && echo more >> build.log",
        timeout=20,
    )
    assert result.exit_code == 0, result.output
    assert started.changes() == [
        FileChange("build.log", "modified", 1, 0),  # .gitignore hides nothing
        FileChange("edit.py", "modified", 2, 1),
        FileChange("gone.txt", "deleted", 0, 2),
        FileChange("src/new.py", "added", 2, 0),
    ]
    diff = started.diff("edit.py")
    assert diff.summary is None
    assert "-b = 2\n+b = 20\n" in diff.text and "+d = 4\n" in diff.text
    assert started.diff("gone.txt").status == "deleted"
    with pytest.raises(KeyError):
        started.diff("keep.txt")
    # A second reading (from the kept index) sees the same, and a revert makes it vanish.
    _write(started, "edit.py", "a = 1\nb = 2\nc = 3\n")
    assert [c.path for c in started.changes()] == ["build.log", "gone.txt", "src/new.py"]


def test_binary_and_large_files_are_summarised(started: LocalWorkspace):
    (started.root / "blob.bin").write_bytes(b"\0\1\2binary")
    _write(started, "big.txt", "line\n" * (MAX_DIFF_BYTES // 5 + 10))
    changes = {c.path: c for c in started.changes()}
    assert changes["blob.bin"] == FileChange("blob.bin", "added", None, None)
    blob = started.diff("blob.bin")
    assert blob.text == "" and blob.summary == "binary file, 9 bytes (added)"
    big = started.diff("big.txt")
    assert big.text == "" and big.summary.startswith("large file, ")


def test_the_workspace_cannot_steer_git(started: LocalWorkspace, tmp_path: Path):
    """Attributes, a config, hooks and a planted .git in the workspace change nothing."""
    marker = tmp_path / "ran"
    _write(started, ".gitattributes", "*.py -diff export-ignore\n*.txt filter=evil\n")
    _write(started, ".git/config", f"[core]\n\tfsmonitor = touch {marker}\n")
    _write(started, ".git/hooks/post-index-change", f"#!/bin/sh\ntouch {marker}\n")
    os.chmod(started.root / ".git/hooks/post-index-change", 0o755)
    _write(started, "edit.py", "a = 1\n")
    _write(started, "keep.txt", "changed\n")
    diff = started.diff("edit.py")
    assert diff.summary is None and "-b = 2\n" in diff.text  # not hidden as binary
    assert "keep.txt" in {c.path for c in started.changes()}
    buffer = io.BytesIO()
    started.archive(buffer)
    buffer.seek(0)
    with tarfile.open(fileobj=buffer, mode="r:gz") as tar:
        names = tar.getnames()
    assert f"{started.root.name}/edit.py" in names  # export-ignore is unset
    assert not any("/.git/" in name for name in names)
    assert not marker.exists()


def test_symlinks_are_recorded_as_links(started: LocalWorkspace, tmp_path: Path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    os.symlink(outside, started.root / "link")
    [change] = [c for c in started.changes() if c.path == "link"]
    assert change.status == "added"
    assert "secret" not in started.diff("link").text


def test_archive_holds_the_files_as_they_are_now(started: LocalWorkspace):
    _write(started, "src/new.py", "print('hi')\n")
    (started.root / "gone.txt").unlink()
    buffer = io.BytesIO()
    started.archive(buffer)
    buffer.seek(0)
    with tarfile.open(fileobj=buffer, mode="r:gz") as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    prefix = started.root.name
    assert files[f"{prefix}/src/new.py"] == b"print('hi')\n"
    assert files[f"{prefix}/build.log"] == b"old log\n"
    assert f"{prefix}/gone.txt" not in files


def test_without_a_baseline_nothing_changed_and_the_archive_still_works(ws: LocalWorkspace):
    _write(ws, "a.txt", "a\n")
    assert ws.changes() == []
    with pytest.raises(KeyError):
        ws.diff("a.txt")
    buffer = io.BytesIO()
    ws.archive(buffer)
    buffer.seek(0)
    with tarfile.open(fileobj=buffer, mode="r:gz") as tar:
        assert f"{ws.root.name}/a.txt" in tar.getnames()
    assert not (ws.state_dir / BASELINE_DIR).exists()


def test_same_size_edits_in_the_same_second_are_seen(ws: LocalWorkspace):
    """git trusts a file's recorded size and mtime (to the second) unless the index is no
    older than the file: the copied index must keep its own mtime."""
    _write(ws, "a.txt", "y = 2\n")
    ws.baseline_take()
    _write(ws, "a.txt", "y = 3\n")
    assert [c.path for c in ws.changes()] == ["a.txt"]
    _write(ws, "a.txt", "y = 2\n")
    assert ws.changes() == []
    _write(ws, "a.txt", "y = 4\n")
    assert [c.path for c in ws.changes()] == ["a.txt"]


def test_a_baseline_that_cannot_be_taken_leaves_the_run_alone(ws: LocalWorkspace, monkeypatch):
    _write(ws, "a.txt", "a\n")
    monkeypatch.setattr("workspaces.baseline._PATH", "/nonexistent")  # no git to be found
    assert ws.baseline_take() is False
    assert ws.changes() == []


def _packs(ws: LocalWorkspace) -> int:
    return len(list((ws.state_dir / BASELINE_DIR / "objects" / "pack").glob("*.pack")))


def _loose(ws: LocalWorkspace) -> int:
    objects = ws.state_dir / BASELINE_DIR / "objects"
    return sum(1 for d in objects.glob("[0-9a-f][0-9a-f]") for _ in d.iterdir())


def _change_large_file(ws: LocalWorkspace, i: int) -> None:
    """A new version of a large file and a small one: a reading stages them as one pack."""
    (ws.root / "big.bin").write_bytes(os.urandom(MAX_DIFF_BYTES + 1024))
    _write(ws, "small.txt", f"version {i}\n")


def test_readings_of_a_changing_workspace_do_not_pile_up_objects(ws: LocalWorkspace):
    """Each reading stages the changed files; what no reading needs any more is dropped, so
    the repository stays near the baseline plus the last reading however many there were."""
    _change_large_file(ws, 0)
    ws.baseline_take()
    most = 0
    for i in range(1, 3 * TIDY_PACK_LIMIT):
        _change_large_file(ws, i)
        assert [(c.path, c.status) for c in ws.changes()] == [
            ("big.bin", "modified"), ("small.txt", "modified"),
        ]  # fmt: skip
        most = max(most, _packs(ws))
    assert most <= TIDY_PACK_LIMIT + 1  # without tidying: one pack per reading
    assert _loose(ws) <= TIDY_PACK_LIMIT + 3  # small.txt's versions since the last tidying
    assert ws.diff("small.txt").text.endswith(f"+version {i}\n")  # the kept index's objects
    assert ws.diff("big.bin").summary.startswith("large file, ")


def test_no_tidying_while_another_reading_is_under_way(ws: LocalWorkspace):
    """A reading holds the lock shared; tidying waits for a moment when it is alone."""
    import fcntl

    _change_large_file(ws, 0)
    ws.baseline_take()
    with open(ws.state_dir / BASELINE_DIR / "readings.lock", "ab") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)
        for i in range(1, TIDY_PACK_LIMIT + 5):
            _change_large_file(ws, i)
            ws.changes()
        assert _packs(ws) > TIDY_PACK_LIMIT + 1
    _change_large_file(ws, 99)
    assert len(ws.changes()) == 2
    assert _packs(ws) <= 2
    assert ws.diff("small.txt").text.endswith("+version 99\n")


def test_a_diff_of_what_is_no_workspace_path_is_refused(started: LocalWorkspace):
    for bad in ("..", "../edit.py", "/etc/passwd", "", ".", "a\0b"):
        with pytest.raises(WorkspacePathError):
            started.diff(bad)
    _write(started, "edit.py", "a = 1\n")
    assert started.diff("./edit.py").path == "edit.py"


def test_git_never_reads_the_workspace_by_name(started: LocalWorkspace, tmp_path: Path):
    """A folder that is a link to another team's folder is recorded as the link; and git's own
    work tree is an empty folder of ours, so nothing it does follows a name in the workspace."""
    outside = tmp_path / "team-b"
    outside.mkdir()
    (outside / "secret.txt").write_text("team b\n")
    os.symlink(outside, started.root / "d")
    (started.root / "nested" / ".git").mkdir(parents=True)
    (started.root / "nested" / ".git" / "config").write_text("[core]\n")
    (started.root / "nested" / "file.txt").write_text("mine\n")
    changed = {c.path for c in started.changes()}
    assert "d" in changed and "nested/file.txt" in changed
    assert not any("secret" in p or ".git/" in p for p in changed)
    buffer = io.BytesIO()
    started.archive(buffer)
    buffer.seek(0)
    with tarfile.open(fileobj=buffer, mode="r:gz") as tar:
        link = tar.getmember(f"{started.root.name}/d")
        assert link.issym() and link.linkname == str(outside)
        assert not any("secret" in name for name in tar.getnames())
