"""Issue 23, item 3: a fork copies another team's folder. While a swapper trades a folder of
the source workspace for a link to another team's folder (RENAME_EXCHANGE, in a loop), fork's
copy must never hold that team's file, and the fork request must never answer 500."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from conversations import store
from conversations.events import UserMessageEvent
from conversations.models import Conversation
from tests.factories import make_conversation
from tests.security.swapper import make_trap, swapping
from workspaces.fs_tree import copy_tree
from workspaces.paths import workspace_in_area

MARKER = b"TEAM-B-PRIVATE-7f3c"
COPIES = 1000
FORKS = 50


@pytest.fixture
def trap(tmp_path: Path, team) -> tuple[Path, Path, Path]:
    """(workspace, its folder d, the link .swap-d to another team's folder holding MARKER)."""
    outside = tmp_path / "team-b-workspace"
    (outside / "sub").mkdir(parents=True)
    (outside / "secret.txt").write_bytes(MARKER + b"\n")
    (outside / "sub" / "deep.txt").write_bytes(MARKER + b" deep\n")
    root = workspace_in_area(Path(settings.CANVAS_WORKSPACES_ROOT), team.pk, "source")
    root.mkdir(parents=True)
    (root / "readme.md").write_text("ours\n")
    folder, link = make_trap(root, outside)
    (folder / "sub").mkdir()
    (folder / "inside.txt").write_text("ours too\n")
    (folder / "sub" / "deep.txt").write_text("ours, deep\n")
    return root, folder, link


def outside_files(tree: Path) -> list[str]:
    """Regular files (never through a link) under `tree` that hold the other team's bytes."""
    found = []
    for folder, _dirs, files in os.walk(tree, followlinks=False):
        for name in files:
            path = Path(folder, name)
            info = path.lstat()
            if stat.S_ISREG(info.st_mode) and MARKER in path.read_bytes():
                found.append(str(path.relative_to(tree)))
    return found


def test_copy_tree_under_a_swapper_never_copies_the_other_teams_files(trap, tmp_path):
    root, folder, link = trap
    copies = tmp_path / "copies"
    copies.mkdir()
    leaked, shapes = [], set()
    with swapping(folder, link):
        for i in range(COPIES):
            dst = copies / str(i)
            dst.mkdir()
            copy_tree(root, dst, limit_bytes=10**6)
            leaked += outside_files(dst)
            shapes.add(("link" if (dst / "d").is_symlink() else "dir", (dst / "d/sub").exists()))
    assert leaked == []
    # The swapper did race the copies: `d` was met both as the folder and as the link.
    assert {kind for kind, _ in shapes} == {"dir", "link"}, shapes


@pytest.mark.django_db(transaction=True)
def test_forks_through_the_api_under_a_swapper_never_hold_outside_files_nor_fail(trap, user, team):
    root, folder, link = trap
    source = make_conversation(user, team, workspace_path=str(root))
    store.append(source.pk, [UserMessageEvent(text="work in d/")])
    client = Client()
    client.force_login(user)
    answers: list[int] = []
    leaked: list[str] = []
    with swapping(folder, link):
        for _ in range(FORKS):
            answer = client.post(f"/api/conversations/{source.pk}/fork", {},
                                 content_type="application/json")  # fmt: skip
            answers.append(answer.status_code)
            if answer.status_code == 201:
                fork = Conversation.objects.get(pk=answer.json()["id"])
                leaked += outside_files(Path(fork.workspace_path))
    assert 500 not in answers and set(answers) <= {201, 400}, answers
    assert answers.count(201) == FORKS  # a race leaves an entry out; it refuses nothing
    assert leaked == []
