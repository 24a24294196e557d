"""Issue 23: a root worker gives a Docker workspace to the container's user when it creates the
container (DockerWorkspace._hand_over). While a swapper trades a folder of the workspace for a
link to a folder outside (RENAME_EXCHANGE, in a loop), no file outside may change owner, and
nothing may fail but a clear refusal. No engine is needed: the container's user is what
`_resolve_user` would have read from the image, and the hand-over is called directly."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import workspaces.docker as docker_workspace
from tests.security.swapper import make_trap, swapping
from workspaces.docker import DockerWorkspace
from workspaces.fs import open_root
from workspaces.fs_tree import chown_tree

TRIES = 1000
MORE_SECONDS = 60.0
"""Past TRIES, how long to keep trying until the race was seen both ways (a loaded machine)."""
BASE_UID = 20000

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only root can give files away")


def _owners(tree: Path) -> set[tuple[int, int]]:
    """The (uid, gid) of `tree` and of everything under it, links themselves included."""
    found = {(tree.lstat().st_uid, tree.lstat().st_gid)}
    for folder, dirs, files in os.walk(tree, followlinks=False):
        for name in dirs + files:
            info = Path(folder, name).lstat()
            found.add((info.st_uid, info.st_gid))
    return found


@pytest.fixture
def trap(tmp_path: Path) -> tuple[DockerWorkspace, Path, Path, Path]:
    """(workspace, its folder d, the link .swap-d, the folder outside .swap-d points to)."""
    outside = tmp_path / "host-folder"
    (outside / "sub").mkdir(parents=True)
    (outside / "secret.txt").write_text("root's\n")
    (outside / "sub" / "deep.txt").write_text("root's too\n")
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "readme.md").write_text("ours\n")
    folder, link = make_trap(root, outside)
    (folder / "sub").mkdir()
    (folder / "inside.txt").write_text("ours too\n")
    (folder / "sub" / "deep.txt").write_text("ours, deep\n")
    state = tmp_path / "state"
    state.mkdir()
    workspace = DockerWorkspace(root, state, conversation_id="c1", team_id=1, image="unused")
    return workspace, folder, link, outside


def _hand_over_as(monkeypatch, owner: tuple[int, int]) -> None:
    """What the engine would have said: the image's user is `owner`."""
    monkeypatch.setattr(docker_workspace, "_resolve_user", lambda api, cid, user: owner)


def test_a_hand_over_under_a_swapper_never_changes_an_owner_outside(trap, monkeypatch):
    workspace, folder, link, outside = trap
    monkeypatch.setattr(DockerWorkspace, "_api", lambda self: None)
    before = _owners(outside)
    root = workspace.root
    given = refused = tries = 0
    changed: list[set[tuple[int, int]]] = []
    real = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)  # the folder, whatever its name
    with swapping(folder, link):
        give_up = time.monotonic() + MORE_SECONDS
        while tries < TRIES or not (given and refused):
            if tries >= TRIES and time.monotonic() > give_up:
                break
            owner = (BASE_UID + tries % 1000, BASE_UID + tries % 1000)
            _hand_over_as(monkeypatch, owner)
            workspace._hand_over("container", "agent")
            tries += 1
            after = _owners(outside)
            if after != before:
                changed.append(after)
            # Were the folder's files (under either name) given this time?
            if os.stat("sub/deep.txt", dir_fd=real).st_uid == owner[0]:
                given += 1
            else:
                refused += 1
    os.close(real)
    assert changed == []
    assert _owners(outside) == before
    assert (root / "readme.md").stat().st_uid == owner[0]
    assert tries >= TRIES
    # The swapper did race the hand-overs: the folder was met as a folder and, as it was
    # entered, as a link (refused, its files left for the next hand-over).
    assert given and refused, (given, refused)


def test_links_hard_links_and_deep_nesting_are_left_and_the_rest_is_given(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("root's\n")
    root = tmp_path / "workspace"
    deep = root.joinpath(*["n"] * 6)
    deep.mkdir(parents=True)
    (root / "file.txt").write_text("ours\n")
    (root / "n" / "file.txt").write_text("ours\n")
    (root / "link").symlink_to(outside)
    os.link(outside, root / "hard.txt")
    (deep / "too-deep.txt").write_text("ours\n")
    owner = (BASE_UID, BASE_UID + 1)
    fd = open_root(root)
    try:
        given = chown_tree(fd, owner, max_depth=4)
    finally:
        os.close(fd)
    assert outside.stat().st_uid == 0 and (root / "link").lstat().st_uid == 0
    assert (root / "hard.txt").stat().st_uid == 0
    for path in (root, root / "file.txt", root / "n", root / "n" / "file.txt",
                 root.joinpath(*["n"] * 4)):  # fmt: skip
        assert (path.stat().st_uid, path.stat().st_gid) == owner, path
    assert root.joinpath(*["n"] * 5).stat().st_uid == 0  # not entered: past max_depth
    assert (deep / "too-deep.txt").stat().st_uid == 0
    assert given == 7  # root, file.txt, n, n/file.txt, n/n, n/n/n, n/n/n/n
