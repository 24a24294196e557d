"""The conversation page across a server restart: a banner that stays in view, a reconnect
within seconds of the server coming back, and the events appended meanwhile shown once.

The server is stopped and a new process started on the same port and the same SQLite file,
as `make up` after Ctrl-C would.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser import test_live_run as live
from tests.browser.test_live_run import (
    REPO,
    _free_port,
    _slow_script,
    _wait_for_port,
    assert_complete_log,
    start_conversation,
    stop_server,
    wait_for_status,
)
from tests.embedded_server import prepared_var
from tests.test_embedded import embedded_env

pytestmark = pytest.mark.browser

# Chromium and a logged-in page (as demo) from test_live_run; the server is this module's.
browser = live.browser
page = live.page

RECONNECT_WITHIN_MS = 5_000
RUNS_ENDED = "() => document.querySelectorAll('#events > .event-run-finished').length"


class RestartableServer:
    """`manage.py serve` on a fixed port and data directory, stopped and started at will."""

    def __init__(self, var: Path) -> None:
        self.var = var
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        log = self.var / "server.log"
        with open(log, "a") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "manage.py", "serve", "--host", "127.0.0.1",
                 "--port", str(self.port)],
                cwd=REPO, env=embedded_env(self.var), stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        _wait_for_port(self.port, self.proc, log)

    def stop(self) -> None:
        if self.proc is not None:
            stop_server(self.proc)
            self.proc = None

    def manage(self, *command: str) -> None:
        subprocess.run(
            [sys.executable, "manage.py", *command], cwd=REPO, check=True,
            capture_output=True, env=embedded_env(self.var),
        )  # fmt: skip


@pytest.fixture(scope="module")
def restartable(tmp_path_factory) -> Iterator[RestartableServer]:
    server = RestartableServer(tmp_path_factory.mktemp("embedded-restart"))
    prepared_var(server.var)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def server(restartable) -> str:
    """The URL the shared `page` fixture logs in to."""
    return restartable.url


COUNT_ATTEMPTS = """() => {
  window.wsAttempts = 0;
  document.addEventListener("htmx:wsConnecting", () => { window.wsAttempts += 1; });
}"""

BANNER_IN_VIEW = """() => {
  const banner = document.getElementById("reconnect-banner");
  if (!banner || banner.hidden) return false;
  const box = banner.getBoundingClientRect();
  return box.height > 0 && box.top >= 0 && box.bottom <= window.innerHeight;
}"""

RETRY_NOW_TRIES = """() => {
  const tried = window.wsAttempts;
  document.querySelector("#reconnect-banner .reconnect-now").click();
  return window.wsAttempts === tried + 1;
}"""
"""One click, one attempt, in one synchronous block: no retry timer can run in between."""

SOCKET_STATE = "() => document.getElementById('live-indicator').dataset.state"


def test_restart_shows_a_banner_and_reconnects_within_seconds_without_duplicates(page, restartable):
    page.set_viewport_size({"width": 900, "height": 420})  # the log is taller than the view
    start_conversation(page, _slow_script(6), "scripted")
    wait_for_status(page, "finished")
    page.wait_for_function(f"() => ({SOCKET_STATE})() === 'open'")
    page.evaluate(COUNT_ATTEMPTS)
    page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
    assert page.evaluate("window.scrollY") > 0
    before = assert_complete_log(page)
    assert page.evaluate(RUNS_ENDED) == 1

    restartable.stop()
    page.wait_for_function(BANNER_IN_VIEW)  # scrolled to the bottom, still in view
    banner = page.locator("#reconnect-banner")
    assert "Reconnecting" in banner.inner_text()
    assert page.evaluate(SOCKET_STATE) == "closed"

    # "Retry now" tries at once (unless an attempt is under way: then it waits for it); the
    # server is still down, so the banner stays.
    page.wait_for_function(RETRY_NOW_TRIES)
    page.wait_for_function(BANNER_IN_VIEW)

    # Appended while the page is cut off: shown once the page resumes from its last seq.
    restartable.manage(
        "shell", "-c",
        "from django.contrib.auth import get_user_model\n"
        "from conversations.models import Conversation\n"
        "from orchestration.services import conversation_post_message\n"
        "c = Conversation.objects.latest('created_at')\n"
        "conversation_post_message(conversation_id=c.pk, text='sent while the page was away',"
        " sender=get_user_model().objects.get(username='demo'))\n",
    )  # fmt: skip

    restartable.start()
    listening = time.monotonic()
    page.wait_for_function(f"() => ({SOCKET_STATE})() === 'open'", timeout=RECONNECT_WITHIN_MS)
    reconnected_ms = (time.monotonic() - listening) * 1000
    assert reconnected_ms < RECONNECT_WITHIN_MS
    assert banner.is_hidden()
    page.wait_for_selector(".event-message-user >> text=sent while the page was away")
    assert page.locator(".event-message-user >> text=sent while the page was away").count() == 1

    # The run the message started, and one started from the page, go on live, each event once.
    page.wait_for_function(f"() => ({RUNS_ENDED})() === 2")
    page.fill("#message-text", "after the restart")
    page.click("#message-form button[type=submit]")
    page.wait_for_selector(".event-message-user >> text=after the restart")
    page.wait_for_function(f"() => ({RUNS_ENDED})() === 3")
    after = assert_complete_log(page)
    assert len(after) > len(before) + 4
    assert page.evaluate(SOCKET_STATE) == "open"
