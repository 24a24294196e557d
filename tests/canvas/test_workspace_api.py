"""The workspace API after a real scripted run: the changes against the baseline the first slice
took, one file's diff, folders and files, the archive, and who may read them."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from teams.models import Role
from teams.secrets import secret_create
from teams.services import member_add
from tests.api import call, client_for
from tests.runs import drive, script

pytestmark = pytest.mark.django_db(transaction=True)

FINISH = {"tool": "finish", "args": {"message": "done"}}
EDITS = (
    {"tool": "terminal", "args": {"command": "rm old.txt && printf 'a\\nb\\nc\\n' > notes.txt"}},
    {
        "tool": "file_editor",
        "args": {
            "command": "str_replace",
            "path": "edit.py",
            "old_str": "y = 2",
            "new_str": "y = 3",
        },
    },
    {
        "tool": "file_editor",
        "args": {"command": "create", "path": "src/made.py", "file_text": "print('made')\n"},
    },
)
"""Deletes old.txt, creates notes.txt and src/made.py, edits edit.py (see _workspace)."""
RUN = script(*EDITS, FINISH)


AFTER_RUN = {
    "proj/edit.py": b"x = 1\ny = 3\n",
    "proj/notes.txt": b"a\nb\nc\n",
    "proj/same.md": b"# unchanged\n",
    "proj/src/made.py": b"print('made')\n",
}
"""The workspace's files after RUN, as its archive holds them."""


def archived_files(data: bytes) -> dict[str, bytes]:
    """name -> content of every regular file in a tar.gz."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def _workspace(team_id: int) -> Path:
    """A named workspace with files in it before the conversation starts."""
    root = Path(settings.CANVAS_WORKSPACES_ROOT) / f"team-{team_id}" / "proj"
    root.mkdir(parents=True)
    (root / "old.txt").write_text("gone soon\n")
    (root / "edit.py").write_text("x = 1\ny = 2\n")
    (root / "same.md").write_text("# unchanged\n")
    return root


@pytest.fixture
def ran(api, team_id, dispatched) -> str:
    """A conversation whose scripted run deleted, created and edited files; its id."""
    _workspace(team_id)
    status, body = call(
        api, "post", "/api/conversations", {"prompt": RUN, "model": "scripted", "workspace": "proj"}
    )
    assert status == 201, body
    drive(dispatched)
    status, got = call(api, "get", f"/api/conversations/{body['id']}")
    assert got["status"] == "finished", got
    return body["id"]


def test_changes_and_diffs_after_a_run(api, ran):
    status, body = call(api, "get", f"/api/conversations/{ran}/changes")
    assert status == 200
    assert body == {
        "files": [
            {"path": "edit.py", "status": "modified", "added": 1, "removed": 1},
            {"path": "notes.txt", "status": "added", "added": 3, "removed": 0},
            {"path": "old.txt", "status": "deleted", "added": 0, "removed": 1},
            {"path": "src/made.py", "status": "added", "added": 1, "removed": 0},
        ]
    }
    status, diff = call(api, "get", f"/api/conversations/{ran}/diff?path=edit.py")
    assert status == 200 and diff["status"] == "modified" and diff["summary"] is None
    assert "-y = 2\n+y = 3\n" in diff["diff"]
    status, error = call(api, "get", f"/api/conversations/{ran}/diff?path=same.md")
    assert status == 404 and "has not changed" in error["detail"]


def test_folders_and_files_read_only_and_confined(api, ran):
    status, root = call(api, "get", f"/api/conversations/{ran}/files")
    assert status == 200 and root["kind"] == "dir"
    assert [(e["name"], e["kind"]) for e in root["entries"]] == [
        ("src", "dir"), ("edit.py", "file"), ("notes.txt", "file"), ("same.md", "file"),
    ]  # fmt: skip
    status, made = call(api, "get", f"/api/conversations/{ran}/files?path=src/made.py")
    assert status == 200
    assert made | {"kind": "file", "text": "print('made')\n", "summary": None} == made
    for path in ("../proj/edit.py", "/etc/passwd", "src/../../x"):
        status, error = call(api, "get", f"/api/conversations/{ran}/files?path={path}")
        assert status == 400 and error["error"] == "invalid_input", (path, error)
    status, _ = call(api, "get", f"/api/conversations/{ran}/files?path=nope")
    assert status == 404


def test_archive_downloads_the_workspace(api, ran):
    response = api.get(f"/api/conversations/{ran}/archive")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/gzip"
    assert response["Content-Disposition"] == 'attachment; filename="proj.tar.gz"'
    assert archived_files(b"".join(response.streaming_content)) == AFTER_RUN


def test_viewers_may_read_other_teams_get_404(api, ran, user, team, other_user, django_user_model):
    viewer = django_user_model.objects.create_user("victor", password="victor-password-1")
    member_add(by=user, team=team, username="victor", role=Role.VIEWER)
    as_viewer, as_mallory = client_for(viewer), client_for(other_user)
    for tail in ("changes", "diff?path=edit.py", "files?path=edit.py", "archive"):
        url = f"/api/conversations/{ran}/{tail}"
        seen = as_viewer.get(url)
        # The archive is raw bytes (a secret written to a file cannot be redacted): not for
        # viewers, who may not act in the conversation.
        expected = 403 if tail == "archive" else 200
        assert seen.status_code == expected, (url, seen.content[:300])
        answer = as_mallory.get(url)
        assert answer.status_code == 404 and answer.json()["error"] == "not_found", url
        assert Client().get(url).status_code == 401, url


def test_names_that_are_not_utf8_are_shown_replaced(api, ran, team_id):
    root = Path(settings.CANVAS_WORKSPACES_ROOT) / f"team-{team_id}" / "proj"
    (root / "caf\xe9.txt".encode("latin-1").decode("utf-8", "surrogateescape")).write_text("x\n")
    status, body = call(api, "get", f"/api/conversations/{ran}/changes")
    assert (
        status == 200
        and {"path": "caf\ufffd.txt", "status": "added", "added": 1, "removed": 0} in body["files"]
    )
    status, listing = call(api, "get", f"/api/conversations/{ran}/files")
    assert status == 200 and "caf\ufffd.txt" in [e["name"] for e in listing["entries"]]


def test_secret_values_in_files_are_redacted(api, ran, user, team):
    value = "tok-3f9a1c77e2b5d04a"
    secret_create(by=user, team=team, name="DEPLOY_TOKEN", value=value)
    root = Path(settings.CANVAS_WORKSPACES_ROOT) / f"team-{team.pk}" / "proj"
    (root / "leak.txt").write_text(f"token={value}\n")
    _, view = call(api, "get", f"/api/conversations/{ran}/files?path=leak.txt")
    _, diff = call(api, "get", f"/api/conversations/{ran}/diff?path=leak.txt")
    for shown in (view["text"], diff["diff"]):
        assert value not in shown and "<secret:DEPLOY_TOKEN>" in shown
