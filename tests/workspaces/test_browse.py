"""Browsing a workspace read-only from outside: listings, file views, and every way out refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workspaces.base import DirEntry, WorkspacePathError
from workspaces.browse import MAX_VIEW_BYTES
from workspaces.local import LocalWorkspace


@pytest.fixture
def tree(ws: LocalWorkspace, tmp_path: Path) -> LocalWorkspace:
    (ws.root / "src" / "pkg").mkdir(parents=True)
    (ws.root / "src" / "main.py").write_text("print('hi')\n")
    (ws.root / "README.md").write_text("# hello\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    os.symlink(outside, ws.root / "escape")
    os.symlink(outside / "secret.txt", ws.root / "src" / "secret-link")
    os.mkfifo(ws.root / "pipe")
    return ws


def test_listing_puts_folders_first_and_names_links_without_following(tree: LocalWorkspace):
    assert tree.list_files("") == [
        DirEntry("src", "dir", None),
        DirEntry("README.md", "file", 8),
        DirEntry("escape", "symlink", None),
        DirEntry("pipe", "other", None),
    ]
    assert tree.list_files("src/") == tree.list_files("./src")
    assert [e.name for e in tree.list_files("src")] == ["pkg", "main.py", "secret-link"]


def test_reading_a_file(tree: LocalWorkspace):
    view = tree.read_file("src/main.py")
    assert (view.path, view.text, view.summary) == ("src/main.py", "print('hi')\n", None)
    (tree.root / "blob").write_bytes(b"\x89PNG\0\0")
    assert tree.read_file("blob").summary == "binary file (6 bytes)"
    (tree.root / "huge.txt").write_bytes(b"x" * (MAX_VIEW_BYTES + 1))
    huge = tree.read_file("huge.txt")
    assert huge.text is None and huge.summary.startswith("too large to show")


@pytest.mark.parametrize(
    "path", ["escape", "escape/secret.txt", "src/secret-link", "../outside", "/etc/passwd",
             "src/../../outside/secret.txt", "a\0b"],
)  # fmt: skip
def test_ways_out_are_refused(tree: LocalWorkspace, path: str):
    with pytest.raises(WorkspacePathError):
        tree.read_file(path)
    with pytest.raises((WorkspacePathError, NotADirectoryError)):
        tree.list_files(path)


def test_kinds_of_not_found(tree: LocalWorkspace):
    with pytest.raises(FileNotFoundError):
        tree.read_file("nope.txt")
    with pytest.raises(NotADirectoryError):
        tree.list_files("README.md")
    with pytest.raises(IsADirectoryError):
        tree.read_file("src")
    with pytest.raises(WorkspacePathError):
        tree.read_file("pipe")  # a FIFO: refused at once, never blocks
