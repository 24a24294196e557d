"""A real browser against the production configuration: Postgres, Redis, `manage.py serve`
without the in-process worker, and a separate `celery -A canvas worker` process.

The stack has a database of its own on the shared Postgres (DATABASE_URL's name plus
`_prod` and the xdist worker's suffix, made and dropped here, migrated by `manage.py migrate`, so it never meets
pytest-django's) and a Redis of its own (tests.faults.services.PrivateRedis) for broker,
channel layer and cache. The web process and the worker name different hosts, so the
conversation row shows which one ran it.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from tests import parallel
from tests.browser import test_live_run as live
from tests.browser.test_live_run import (
    DETAIL_URL,
    _wait_for_port,
    assert_complete_log,
    start_conversation,
    stop_server,
    wait_for_status,
)
from tests.conftest import REPO, WorkerProcess, wait_for
from tests.faults.services import PrivateRedis, free_port

pytestmark = [pytest.mark.browser, pytest.mark.worker]

browser = live.browser
page = live.page  # logs in as demo on this module's `server`

WEB_HOST = "prod-web"
WORKER_HOST = "prod-worker"
GO_FILE = "go"
"""The run's command waits for this file in its workspace: the test lets it go once the page's
socket is open, so the rest of the run can only reach the page over that socket."""


def _database_urls() -> tuple[str, str]:
    """(this stack's database URL, the maintenance database's) on the tests' Postgres."""
    url = urlsplit(os.environ["DATABASE_URL"])
    name = f"{url.path.lstrip('/')}_prod{parallel.suffix()}"  # one per xdist worker
    return url._replace(path=f"/{name}").geturl(), url._replace(path="/postgres").geturl()


def _recreate(maintenance_url: str, database_url: str, *, create: bool) -> None:
    name = urlsplit(database_url).path.lstrip("/")
    with psycopg.connect(maintenance_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if create:
            admin.execute(f'CREATE DATABASE "{name}"')


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[dict]:
    """Database, Redis, worker and web server; yields the web's URL and the database's."""
    var = tmp_path_factory.mktemp("production")
    database_url, maintenance_url = _database_urls()
    _recreate(maintenance_url, database_url, create=True)
    redis = PrivateRedis().start()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis.url,
        "SECRET_KEY": secrets.token_urlsafe(50),
        "CANVAS_VAR_DIR": str(var),
        "CANVAS_WORKSPACES_ROOT": str(var / "workspaces"),
        "CANVAS_STATE_ROOT": str(var / "state"),
        "DJANGO_SETTINGS_MODULE": "canvas.settings",
    }
    worker: WorkerProcess | None = None
    web: subprocess.Popen | None = None
    log = open(var / "web.log", "w")  # noqa: SIM115 - closed below
    try:
        manage = [sys.executable, "manage.py"]
        for command in (["migrate", "--noinput"], ["ensure_demo_user"]):
            subprocess.run(manage + command, cwd=REPO, env=env, check=True, capture_output=True)
        worker = WorkerProcess(var, extra_env={**env, "CANVAS_WORKER_HOST": WORKER_HOST}).start()
        port = free_port()
        web = subprocess.Popen(
            [*manage, "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=REPO, env={**env, "CANVAS_WORKER_HOST": WEB_HOST},
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        _wait_for_port(port, web, var / "web.log")
        yield {"url": f"http://127.0.0.1:{port}", "database_url": database_url}
    finally:
        if web is not None:
            stop_server(web)
        log.close()
        if worker is not None:
            worker.stop()
        redis.stop()
        _recreate(maintenance_url, database_url, create=False)


@pytest.fixture(scope="module")
def server(stack) -> str:
    return stack["url"]


def _row(database_url: str, conversation_id: str) -> tuple[str, str, str]:
    """(status, worker_host, workspace_path) of the conversation, read from the stack's
    database."""
    with psycopg.connect(database_url) as db:
        row = db.execute(
            "SELECT status, worker_host, workspace_path FROM conversations_conversation"
            " WHERE id = %s",
            [conversation_id],
        ).fetchone()
    assert row is not None, conversation_id
    return row


def _pinned(database_url: str, conversation_id: str) -> tuple[str, str, str] | None:
    row = _row(database_url, conversation_id)
    return row if row[1] else None


def test_a_run_streams_live_from_a_separate_worker(page, stack):
    frames: list[str] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda f: frames.append(f)))
    wait_then_finish = {
        "script": [
            {
                "tool": "terminal",
                "args": {"command": f"until [ -e {GO_FILE} ]; do sleep 0.1; done; echo released"},
            },
            {"tool": "think", "args": {"thought": "the command came back"}},
            {"tool": "finish", "args": {"message": "done in production"}},
        ]
    }
    start_conversation(page, json.dumps(wait_then_finish), "scripted")
    conversation_id = DETAIL_URL.search(page.url).group(0).split("/")[2]
    page.evaluate("window.__sameDocument = true")  # a reload would drop this

    # The worker holds the run in the command; the page's socket is open and waiting.
    page.locator(".event-tool-call .terminal-command", has_text="until").wait_for(timeout=60_000)
    page.wait_for_function(
        "() => document.getElementById('live-indicator').dataset.state === 'open'"
    )
    status, host, workspace = wait_for(
        lambda: _pinned(stack["database_url"], conversation_id),
        message="the worker to pin the conversation to its host",
    )
    assert (status, host) == ("running", WORKER_HOST)
    shown = live.shown_seqs(page)
    Path(workspace, GO_FILE).touch()

    wait_for_status(page, "finished")
    seqs = assert_complete_log(page)
    assert page.evaluate("window.__sameDocument") is True
    assert page.locator("#live-indicator").inner_text() == "live"
    assert page.locator(".event-tool-result .output").first.inner_text().startswith("released")
    # finish's message is the final answer, shown once (its result does not repeat it).
    assert page.locator("#events .final-answer .answer-text").inner_text() == "done in production"
    assert page.locator(".event-tool-result", has_text="done in production").count() == 0
    # Everything after the release reached the page as socket frames, in order.
    streamed = [int(s) for f in frames for s in live.FRAME_SEQ.findall(str(f))]
    later = [s for s in seqs if s > max(shown)]
    assert later and [s for s in streamed if s in later] == later, (shown, streamed, seqs)
    assert _row(stack["database_url"], conversation_id)[:2] == ("finished", WORKER_HOST)
