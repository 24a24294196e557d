"""Issue 23, items 3 and 7: the files / diff / archive views while a swapper trades a folder of
the workspace for a link to another team's folder (RENAME_EXCHANGE, in a loop). No reading may
hold that team's bytes or names, none may answer 500, and `diff?path=..` is a 400."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from conversations import store
from conversations.events import UserMessageEvent
from orchestration.workspace import workspace_of
from tests.factories import make_conversation
from tests.security.swapper import make_trap, swapping
from workspaces.base import WorkspacePathError
from workspaces.paths import workspace_in_area

pytestmark = pytest.mark.django_db(transaction=True)

MARKER = "TEAM-B-PRIVATE-91d2"
SECRET_NAME = "team-b-only.txt"
ROUNDS = 200
"""Each round reads five ways (changes, diff, list, read, archive): 1,000 readings."""
API_ROUNDS = 15


@pytest.fixture
def conversation(tmp_path: Path, user, team):
    outside = tmp_path / "team-b-workspace"
    outside.mkdir()
    (outside / SECRET_NAME).write_text(MARKER + "\n")
    (outside / "inside.txt").write_text(MARKER + " under our file's name\n")
    root = workspace_in_area(Path(settings.CANVAS_WORKSPACES_ROOT), team.pk, "viewed")
    root.mkdir(parents=True)
    folder, link = make_trap(root, outside)
    (folder / "inside.txt").write_text("ours\n")
    conversation = make_conversation(user, team, workspace_path=str(root))
    store.append(conversation.pk, [UserMessageEvent(text="look")])
    workspace = workspace_of(conversation)
    assert workspace.baseline_take()
    (folder / "inside.txt").write_text("ours, edited\n")
    return conversation, folder, link


def _archived(data: bytes) -> str:
    """Every member's name and every regular file's bytes, as one text to search."""
    seen = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            seen.append(member.name)
            if member.isfile():
                seen.append(tar.extractfile(member).read().decode("utf-8", "replace"))
    return "\n".join(seen)


def _read_all_ways(workspace) -> tuple[list[str], int]:
    """What one round shows (as text) and how many readings were refused cleanly."""
    shown, refused = [], 0
    shown += [c.path for c in workspace.changes()]
    for read in (
        lambda: workspace.diff("d/inside.txt").text,
        lambda: " ".join(e.name for e in workspace.list_files("d")),
        lambda: workspace.read_file("d/inside.txt").text or "",
    ):
        try:
            shown.append(read())
        except (KeyError, WorkspacePathError, FileNotFoundError, NotADirectoryError):
            refused += 1  # `d` was the link (or mid-swap) just then: a clean refusal
    out = io.BytesIO()
    workspace.archive(out)
    shown.append(_archived(out.getvalue()))
    return shown, refused


def test_readings_under_a_swapper_never_show_the_other_teams_files(conversation):
    source, folder, link = conversation
    workspace = workspace_of(source)
    leaked, refused = [], 0
    with swapping(folder, link):
        for _ in range(ROUNDS):
            shown, refusals = _read_all_ways(workspace)
            refused += refusals
            leaked += [text for text in shown if MARKER in text or SECRET_NAME in text]
    assert leaked == []
    assert refused > 0  # the swapper did race the readings


def test_the_api_under_a_swapper_answers_no_500_and_shows_nothing_outside(conversation, user):
    source, folder, link = conversation
    client = Client()
    client.force_login(user)
    base = f"/api/conversations/{source.pk}"
    answers, leaked = [], []
    with swapping(folder, link):
        for _ in range(API_ROUNDS):
            for tail in ("changes", "diff?path=d/inside.txt", "files?path=d",
                         "files?path=d/inside.txt", "archive"):  # fmt: skip
                answer = client.get(f"{base}/{tail}")
                answers.append(answer.status_code)
                if tail == "archive" and answer.status_code == 200:
                    body = _archived(b"".join(answer.streaming_content))
                else:
                    body = answer.content.decode()
                if MARKER in body or SECRET_NAME in body:
                    leaked.append(tail)
    assert 500 not in answers and set(answers) <= {200, 400, 404}, answers
    assert leaked == []


@pytest.mark.parametrize("path", ["..", "../viewed/d", "/etc/passwd", "d/../..", ".", "a%00b"])
def test_a_diff_of_what_is_no_workspace_path_is_a_400(conversation, user, path):
    source, _, _ = conversation
    client = Client()
    client.force_login(user)
    answer = client.get(f"/api/conversations/{source.pk}/diff?path={path}")
    assert answer.status_code == 400, answer.content
    assert answer.json()["error"] == "invalid_input"
