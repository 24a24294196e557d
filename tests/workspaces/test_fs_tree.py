"""Walking, sizing and copying a workspace tree by handle (workspaces.fs_tree)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from workspaces.fs import open_root
from workspaces.fs_tree import (
    Entry,
    TreeTooDeep,
    TreeTooLarge,
    copy_tree,
    tree_size,
    walk,
)


@pytest.fixture
def src(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "run.sh").write_text("echo hi\n")
    (root / "a" / "b" / "run.sh").chmod(0o751)
    (root / "top.txt").write_bytes(b"x" * 100)
    (root / "empty").mkdir()
    (root / "link").symlink_to("/etc/passwd")
    (root / "dirlink").symlink_to(tmp_path, target_is_directory=True)
    os.mkfifo(root / "pipe")
    return root


def _tree(root: Path) -> dict[str, str]:
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                found[rel] = "-> " + os.readlink(path)
            elif path.is_dir():
                found[rel] = f"dir {stat.S_IMODE(path.stat().st_mode):o}"
            elif path.is_file():
                found[rel] = f"{path.read_bytes()!r} {stat.S_IMODE(path.stat().st_mode):o}"
    return found


def test_copy_keeps_files_modes_and_links_and_skips_pipes(src: Path, tmp_path: Path):
    dst = tmp_path / "dst"
    dst.mkdir()
    copied = copy_tree(src, dst, limit_bytes=10_000)
    assert (copied.files, copied.links, copied.bytes) == (2, 2, 108)
    assert _tree(dst) == _tree(src)
    assert not (dst / "pipe").exists()
    assert (dst / "a/b/run.sh").stat().st_mtime_ns == (src / "a/b/run.sh").stat().st_mtime_ns
    assert os.readlink(dst / "dirlink") == str(tmp_path)  # the text, never followed


def test_a_read_only_folder_is_copied_with_its_contents(src: Path, tmp_path: Path):
    (src / "a").chmod(0o555)
    dst = tmp_path / "dst"
    dst.mkdir()
    try:
        copy_tree(src, dst, limit_bytes=10_000)
        assert (dst / "a/b/run.sh").read_text() == "echo hi\n"
        assert stat.S_IMODE((dst / "a").stat().st_mode) == 0o555
    finally:
        (src / "a").chmod(0o755)
        if (dst / "a").exists():
            (dst / "a").chmod(0o755)


def test_the_limit_counts_bytes_as_they_are_copied(src: Path, tmp_path: Path):
    dst = tmp_path / "dst"
    dst.mkdir()
    assert tree_size(src, 10_000) == 108
    assert tree_size(src, 50) > 50  # stops counting once past the limit
    with pytest.raises(TreeTooLarge) as refused:
        copy_tree(src, dst, limit_bytes=107)
    assert refused.value.limit == 107


def test_skip_leaves_an_entry_out(src: Path, tmp_path: Path):
    dst = tmp_path / "dst"
    dst.mkdir()
    copy_tree(src, dst, limit_bytes=10_000, skip=lambda e: e.parts == ("a",))
    assert not (dst / "a").exists() and (dst / "top.txt").exists()


def test_walk_never_enters_a_link_and_refuses_deep_nesting(src: Path, tmp_path: Path):
    fd = open_root(src)
    try:
        paths = {e.path: e.kind for e in walk(fd) if isinstance(e, Entry)}
    finally:
        os.close(fd)
    assert paths["dirlink"] == "link" and not any(p.startswith("dirlink/") for p in paths)
    assert "pipe" not in paths
    deep = tmp_path / "deep"
    (deep / "/".join(["d"] * 6)).mkdir(parents=True)
    fd = open_root(deep)
    try:
        with pytest.raises(TreeTooDeep):
            list(walk(fd, max_depth=4))
    finally:
        os.close(fd)


def test_a_folder_swapped_for_a_link_after_listing_is_left_out(src: Path, tmp_path: Path):
    """The race in slow motion: the walk has listed `a` as a folder; before it enters, `a`
    becomes a link to somewhere outside. The copy leaves it out."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("other team\n")
    dst = tmp_path / "dst"
    dst.mkdir()

    def swap(entry: Entry) -> bool:
        if entry.parts == ("a",):
            os.rename(src / "a", tmp_path / "a-moved")
            (src / "a").symlink_to(outside, target_is_directory=True)
        return False

    copy_tree(src, dst, limit_bytes=10_000, skip=swap)
    assert not (dst / "a").exists()
    assert "other team" not in repr(_tree(dst))
