"""A cut command output's whole text in the workspace's output area: written once the output
is too long, named in the cut, bounded, pruned, never through a link, out of the Changes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from workspaces import outputs
from workspaces.local import LocalWorkspace
from workspaces.outputs import OUTPUT_NAME, OUTPUTS_DIR


def _files(root: Path) -> list[Path]:
    area = root / OUTPUTS_DIR
    return sorted(area.iterdir()) if area.is_dir() else []


def test_a_long_output_is_kept_whole_and_the_cut_names_the_file(dirs):
    ws = LocalWorkspace(*dirs, max_output_chars=1000)
    result = ws.run("seq 1 200000", timeout=30)
    assert result.truncated and result.output.startswith("1\n2\n")
    assert result.output.endswith("199999\n200000\n")
    (kept,) = _files(ws.root)
    assert OUTPUT_NAME.fullmatch(kept.name)
    assert result.output_file == f"{OUTPUTS_DIR}/{kept.name}"
    assert kept.read_text() == "".join(f"{i}\n" for i in range(1, 200001))
    note = re.search(r"\[\.\.\. (\d+) characters cut; the whole output \((\d+) lines\) is in "
                     r"(\S+): read the middle", result.output)  # fmt: skip
    assert note is not None, result.output[:1500]
    assert note.group(2) == "200000" and note.group(3) == str(ws.root / result.output_file)
    assert len(result.output) < 1500


def test_a_short_output_writes_nothing(ws):
    result = ws.run("echo hi", timeout=10)
    assert result.output_file is None and _files(ws.root) == []


def test_the_kept_output_is_bounded(dirs, monkeypatch):
    monkeypatch.setattr(outputs, "SPOOL_MAX_BYTES", 10_000)
    ws = LocalWorkspace(*dirs, max_output_chars=1000)
    result = ws.run("seq 1 100000", timeout=30)
    (kept,) = _files(ws.root)
    assert kept.stat().st_size == 10_000
    assert "(its first" in result.output


def test_old_outputs_are_pruned(dirs, monkeypatch):
    monkeypatch.setattr(outputs, "KEEP_FILES", 3)
    ws = LocalWorkspace(*dirs, max_output_chars=200)
    names = [ws.run(f"seq {i} 5000", timeout=30).output_file for i in range(1, 6)]
    left = [f"{OUTPUTS_DIR}/{p.name}" for p in _files(ws.root)]
    assert sorted(left) == sorted(names[-3:])


def test_a_linked_output_area_is_never_written_through(dirs, tmp_path):
    ws = LocalWorkspace(*dirs, max_output_chars=200)
    ws.root.mkdir(parents=True, exist_ok=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (ws.root / OUTPUTS_DIR).symlink_to(elsewhere)
    result = ws.run("seq 1 5000", timeout=30)
    assert result.truncated and result.output_file is None
    assert list(elsewhere.iterdir()) == []
    assert "characters cut ...]" in result.output


def test_the_output_area_is_not_a_change(dirs):
    ws = LocalWorkspace(*dirs, max_output_chars=200)
    ws.root.mkdir(parents=True, exist_ok=True)
    ws.baseline_take()
    ws.run("seq 1 5000; echo made > made.txt", timeout=30)
    assert [c.path for c in ws.changes()] == ["made.txt"]


@pytest.mark.django_db(transaction=True)
def test_the_terminal_result_links_the_whole_output_on_the_page(user, team, dispatched):
    import json

    from django.test import Client

    from conversations import store
    from conversations.events import ObservationEvent
    from orchestration import services
    from teams.secrets import secret_create
    from tests.runs import drive

    secret_create(by=user, team=team, name="TOKEN", value="tok-secret-98765", description="")
    command = 'seq 1 40000; echo "$TOKEN"; seq 1 40000'
    prompt = json.dumps({"script": [
        {"tool": "terminal", "args": {"command": command, "security_risk": "LOW"}},
        {"tool": "finish", "args": {"message": "done"}},
    ]})  # fmt: skip
    conversation = services.conversation_create(owner=user, model="scripted", prompt=prompt)
    drive(dispatched)
    (stored,) = [s for s in store.load(conversation.pk)
                 if isinstance(s.event, ObservationEvent) and s.event.tool == "terminal"]  # fmt: skip
    assert stored.event.output_file and stored.event.output_file in stored.event.content
    client = Client()
    client.force_login(user)
    page = client.get(f"/conversations/{conversation.pk}/").content.decode()
    link = f"/conversations/{conversation.pk}/events/{stored.seq}/output/file"
    assert link in page
    whole = client.get(link)
    assert whole.status_code == 200 and whole["Content-Type"].startswith("text/plain")
    text = whole.content.decode()
    assert "<secret:TOKEN>" in text and "tok-secret-98765" not in text
    assert text.count("\n") == 80001
    Path(conversation.workspace_path, stored.event.output_file).unlink()
    assert client.get(link).status_code == 404


@pytest.mark.django_db
def test_the_page_never_reads_an_output_through_a_link(user, team, tmp_path):
    from canvas.workspace_reads import output_text
    from common.errors import NotFound
    from tests.factories import make_conversation

    root = tmp_path / "ws"
    (root / OUTPUTS_DIR).mkdir(parents=True)
    name = "20261202T000000-0123abcd.log"
    (root / OUTPUTS_DIR / name).symlink_to("/etc/passwd")
    conversation = make_conversation(user, team, workspace_path=str(root))
    for hostile in (f"{OUTPUTS_DIR}/{name}", f"{OUTPUTS_DIR}/../../etc/passwd", "/etc/passwd"):
        with pytest.raises(NotFound):
            output_text(conversation, hostile)
    (root / OUTPUTS_DIR / name).unlink()
    (root / OUTPUTS_DIR).rmdir()
    (root / OUTPUTS_DIR).symlink_to(tmp_path)
    (tmp_path / name).write_text("outside")
    with pytest.raises(NotFound):
        output_text(conversation, f"{OUTPUTS_DIR}/{name}")
