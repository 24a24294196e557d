"""A scripted run in a Docker workspace, started from the page and run by a separate Celery
worker, against the real engine and the locally built test image (tests.docker_images).

The stack is test_production_config's (Postgres, Redis, `manage.py serve`, `celery -A canvas
worker`), started with the test image as the site's only image and a local git repository the
site lets runs start from. The person chooses "Docker container", the image and the repository
in the new-conversation form; the run makes test_workspace_api's edits (terminal and file
editor) on the repository's files, so its Changes are test_workspace_panels' EXPECTED, against
the source's starting commit. The container carries our labels while the conversation is open
and is gone after the page's Close; the Changes panel still reads the folder afterwards.
Every container of this stack's conversations is removed (by label) at the end, whatever
happened.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import docker
import psycopg
import pytest
from playwright.sync_api import Page, expect

from tests.browser import test_live_run as live
from tests.browser import test_production_config as production
from tests.browser.test_live_run import DETAIL_URL, wait_for_status
from tests.browser.test_workspace_panels import EXPECTED
from tests.canvas.test_workspace_api import RUN
from tests.docker_images import test_image
from workspaces.docker import LABEL_CONVERSATION, LABEL_MANAGED, LABEL_TEAM

pytestmark = [pytest.mark.docker, pytest.mark.browser, pytest.mark.worker]

browser = live.browser
page = live.page  # logs in as demo on this module's `server`
stack = production.stack

STARTING_FILES = {"edit.py": "x = 1\ny = 2\n", "old.txt": "gone soon\n", "same.md": "# unchanged\n"}
"""The repository's one commit: the files test_workspace_api's EDITS change."""


def _make_repo(where: Path) -> Path:
    where.mkdir()
    for name, text in STARTING_FILES.items():
        (where / name).write_text(text)
    for argv in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-qm", "start"]):
        subprocess.run(
            ["git", "-c", "user.name=test", "-c", "user.email=test@example.com", *argv],
            cwd=where, check=True, capture_output=True,
        )  # fmt: skip
    return where


@pytest.fixture(scope="module")
def docker_site(tmp_path_factory) -> Iterator[Path]:
    """The test image as the site's only one and a git repository under the site's local
    roots, in the environment the stack's processes inherit (so request it before `stack`);
    yields the repository."""
    image = test_image()
    repos = tmp_path_factory.mktemp("repos")
    repo = _make_repo(repos / "proj")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CANVAS_DOCKER_IMAGE", image)
        patch.setenv("CANVAS_DOCKER_IMAGES", image)
        patch.setenv("CANVAS_GIT_LOCAL_ROOTS", str(repos))
        yield repo


@pytest.fixture(scope="module")
def server(docker_site, stack) -> str:
    return stack["url"]


def _conversation(database_url: str, conversation_id: str) -> tuple[int, str]:
    """(team_id, worker_host) of the conversation, read from the stack's database."""
    with psycopg.connect(database_url) as db:
        row = db.execute(
            "SELECT team_id, worker_host FROM conversations_conversation WHERE id = %s",
            [conversation_id],
        ).fetchone()
    assert row is not None, conversation_id
    return row


def _containers(client: docker.DockerClient, conversation_id: str) -> list:
    label = f"{LABEL_CONVERSATION}={conversation_id}"
    return client.containers.list(all=True, filters={"label": label})


@pytest.fixture
def engine(stack) -> Iterator[docker.DockerClient]:
    """The engine; afterwards, every container of a conversation in the stack's database is
    removed (the engine is shared with other tests: only ours, found by label)."""
    client = docker.from_env()
    try:
        yield client
    finally:
        with psycopg.connect(stack["database_url"]) as db:
            ids = [str(row[0]) for row in db.execute("SELECT id FROM conversations_conversation")]
        for conversation_id in ids:
            for container in _containers(client, conversation_id):
                container.remove(force=True)
        client.close()


def _assert_changes(page: Page) -> None:
    """The Changes tab lists EXPECTED's files with their status and counts, and shows a
    modified and a deleted file's diff."""
    rows = page.locator("#panel-body .change")
    expect(rows).to_have_count(len(EXPECTED))
    for path, (status, added, removed) in EXPECTED.items():
        summary = page.locator(f"#panel-body details[data-path='{path}'] summary")
        expect(summary.locator(".change-status")).to_have_text(status)
        expect(summary.locator(".change-counts")).to_have_text(f"{added} {removed}")
    page.locator("#panel-body details[data-path='edit.py'] summary").click()
    diff = page.locator("#panel-body details[data-path='edit.py'] .panel-diff")
    expect(diff.locator(".pd-del")).to_have_text("-y = 2")
    expect(diff.locator(".pd-add")).to_have_text("+y = 3")
    page.locator("#panel-body details[data-path='old.txt'] summary").click()
    expect(page.locator("#panel-body details[data-path='old.txt'] .pd-del")).to_have_text(
        "-gone soon"
    )


def test_a_docker_run_shows_its_changes_and_close_removes_its_container(
    page, stack, docker_site, engine
):
    image = test_image()
    page.goto("/")
    expect(page.locator("#id_workspace_kind option[value=docker]")).to_be_enabled()
    page.fill("#id_prompt", RUN)
    page.select_option("#id_model", "scripted")
    page.select_option("#id_workspace_kind", "docker")
    page.select_option("#id_image", image)
    page.fill("#id_git_repo", str(docker_site))
    page.click("#new-conversation button[type=submit]")
    page.wait_for_url(DETAIL_URL)
    conversation_id = DETAIL_URL.search(page.url).group(0).split("/")[2]

    wait_for_status(page, "finished")
    team_id, worker_host = _conversation(stack["database_url"], conversation_id)
    assert worker_host == production.WORKER_HOST  # the separate worker ran it, not the web
    _assert_changes(page)

    # Files: the file the run created, as the worker's container wrote it.
    page.click("#tab-files")
    page.click("#panel-body .file-list a >> text=src/")
    page.click("#panel-body .file-list a >> text=made.py")
    expect(page.locator("#panel-body .file-view .highlight")).to_have_text("print('made')")

    # Open (finished, not closed): its container is there, from the image, with our labels.
    (container,) = _containers(engine, conversation_id)
    assert container.image.tags == [image]
    assert container.labels[LABEL_MANAGED] == "1"
    assert container.labels[LABEL_TEAM] == str(team_id)
    assert container.status == "running"

    # Close (after the confirmation) removes it before the page hears back.
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#controls .close-conversation")
    expect(page.locator("#controls .tag.closed")).to_be_visible()
    assert _containers(engine, conversation_id) == []

    # The folder stays: a fresh page's Changes panel reads it as before, without a container.
    page.reload()
    expect(page.locator("#controls .tag.closed")).to_be_visible()
    _assert_changes(page)
    assert _containers(engine, conversation_id) == []
