"""A real browser against a real server: log in, start runs, watch events arrive live.

The server is `manage.py serve` in the embedded mode (its own SQLite file, in-process worker),
so it shares nothing with the test database. Chromium is Debian's; Playwright never downloads.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser import WAIT_MS
from tests.embedded_server import prepared_var

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
]
SCREENSHOT = Path("/tmp/ui-detail.png")
DETAIL_URL = re.compile(r"/conversations/[0-9a-f-]{36}/$")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early:\n{log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"server did not listen on {port}:\n{log.read_text()}")


_VAR_DIRS: dict[str, Path] = {}
"""Each running embedded server's CANVAS_VAR_DIR (its SQLite file), by its URL."""


def _embedded_env(var: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    return env | {"CANVAS_VAR_DIR": str(var), "DJANGO_SETTINGS_MODULE": "canvas.settings", **extra}


def manage(server: str, *command: str, **env: str) -> str:
    """Run a manage.py command on the embedded server's own database (e.g. a second login:
    `manage(server, "ensure_demo_user", CANVAS_DEMO_USER="mia", ...)`); returns its output."""
    result = subprocess.run(
        [sys.executable, "manage.py", *command], cwd=REPO, check=True, capture_output=True,
        text=True, env=_embedded_env(_VAR_DIRS[server], **env),
    )  # fmt: skip
    return result.stdout


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[str]:
    var = tmp_path_factory.mktemp("embedded")
    env = _embedded_env(var)
    django_admin = [sys.executable, "manage.py"]
    prepared_var(var)
    port = _free_port()
    log = var / "server.log"
    url = f"http://127.0.0.1:{port}"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [*django_admin, "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        _VAR_DIRS[url] = var
        try:
            _wait_for_port(port, proc, log)
            yield url
        finally:
            _VAR_DIRS.pop(url, None)
            stop_server(proc)


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group (started in a session of its own), SIGKILL if it
    lingers."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(base_url=server, viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto("/")
    page.fill("#id_username", "demo")
    page.fill("#id_password", "demo-password")
    page.click("form button[type=submit]")
    page.wait_for_url(f"{server}/")
    yield page
    context.close()
    assert not errors, errors


def start_conversation(page, prompt: str, model: str) -> None:
    page.fill("#id_prompt", prompt)
    page.select_option("#id_model", model)
    page.click("#new-conversation button[type=submit]")
    page.wait_for_url(DETAIL_URL)


def shown_seqs(page) -> list[int]:
    return page.eval_on_selector_all(
        "#events > [data-seq]", "rows => rows.map(r => Number(r.dataset.seq))"
    )


def assert_complete_log(page) -> list[int]:
    seqs = shown_seqs(page)
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    ids = page.eval_on_selector_all("[id^=event-]", "els => els.map(e => e.id)")
    assert len(ids) == len(set(ids)), ids
    return seqs


def wait_for_status(page, status: str, timeout: float = 60_000) -> None:
    page.wait_for_selector(f"#status-badge.status-{status}", timeout=timeout)


def test_demo_run_streams_live_and_finishes(page):
    start_conversation(page, "Write FizzBuzz and <b>run</b> it.", "demo")
    page.evaluate("window.__sameDocument = true")  # a reload would drop this
    wait_for_status(page, "finished")

    seqs = assert_complete_log(page)
    assert page.evaluate("window.__sameDocument") is True
    commands = page.locator(".event-tool-call .terminal-command").all_inner_texts()
    assert any("python3 fizzbuzz.py" in c for c in commands), commands
    outputs = page.locator(".event-tool-result .output").all_inner_texts()
    assert any("NameError" in o for o in outputs)
    assert any("1 2 Fizz 4 Buzz" in o for o in outputs)
    assert page.locator(".event-tool-result .exit-fail").count() >= 1
    assert page.locator(".event-message-user").first.inner_text().count("<b>run</b>")
    assert page.locator("#live-indicator").inner_text() == "live"
    assert page.locator("#controls button.pause").is_disabled()

    # A follow-up goes through the htmx form; its events arrive over the socket.
    page.fill("#message-text", "Thanks! Anything else?")
    page.click("#message-form button[type=submit]")
    page.wait_for_selector(".event-message-user >> text=Thanks! Anything else?")
    page.wait_for_function(
        "n => document.querySelectorAll('#events > [data-seq]').length > n", arg=len(seqs) + 3
    )
    wait_for_status(page, "finished")
    assert page.locator("#message-text").input_value() == ""
    assert_complete_log(page)
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(SCREENSHOT), full_page=True)

    page.goto("/")
    row = page.locator("#conversation-rows tr", has_text="Write FizzBuzz")
    assert row.locator(".badge").inner_text() == "Finished"


def _slow_script(steps: int) -> str:
    script = [
        {"tool": "terminal", "args": {"command": f"sleep 0.7; echo step-{i}"}}
        for i in range(1, steps + 1)
    ]
    return json.dumps({"script": [*script, {"say": "all steps done"}]})


FRAME_SEQ = re.compile(r'data-seq="(\d+)"')


class Relay:
    """A pass-through proxy for the page's socket that records both directions and can be cut,
    like a network link between the browser and the server."""

    def __init__(self, page_side) -> None:
        self.page_side = page_side
        self.server_side = page_side.connect_to_server()
        self.sent: list[str] = []
        self.received: list[str] = []
        page_side.on_message(self._from_page)
        self.server_side.on_message(self._from_server)
        self.server_side.on_close(lambda code, reason: None)  # cut() decides what the page sees

    def _from_page(self, message) -> None:
        self.sent.append(message)
        self.server_side.send(message)

    def _from_server(self, message) -> None:
        self.received.append(message)
        self.page_side.send(message)

    def cut(self, code: int) -> None:
        """Stop the server side first, so every frame recorded has reached the page."""
        self.server_side.close()
        self.page_side.close(code=code, reason="link cut by the test")

    def received_seqs(self) -> list[int]:
        return [int(s) for frame in self.received for s in FRAME_SEQ.findall(frame)]


WATCH_FOR_FRAME = """(frame) => {
  document.addEventListener("htmx:wsBeforeMessage", (evt) => {
    if (evt.detail.message === frame) window.frameDropped = evt.defaultPrevented;
  });
}"""
"""Record whether the page's own handler (registered earlier, so run first) drops `frame`."""


def wait_for_relays(page, relays: list[Relay], count: int) -> None:
    deadline = time.monotonic() + 15
    while len(relays) < count and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    assert len(relays) == count, f"expected {count} connections, saw {len(relays)}"
    page.wait_for_function(
        "() => document.getElementById('live-indicator').dataset.state === 'open'"
    )


def test_reconnect_and_reload_resume_without_gaps_or_duplicates(page):
    relays: list[Relay] = []
    page.route_web_socket(re.compile(r"/ws/ui/conversations/"), lambda ws: relays.append(Relay(ws)))
    start_conversation(page, _slow_script(8), "scripted")
    page.wait_for_selector(".output >> text=step-2", timeout=60_000)
    first = relays[0]
    rendered = json.loads(first.sent[0])["resume"]
    assert first.received_seqs()[0] == rendered + 1  # the socket starts right after the page

    # A frame the page already shows is dropped (belt and braces against replays).
    replay = next(f for f in first.received if "data-seq" in f)
    page.evaluate(WATCH_FOR_FRAME, replay)
    first.page_side.send(replay)
    page.wait_for_function("() => window.frameDropped !== undefined")
    assert page.evaluate("window.frameDropped")
    assert_complete_log(page)

    # Drop the link mid-run as a restarting server would (1012): the ws extension reconnects
    # with backoff and the page resumes from its last seq while the run keeps appending.
    first.cut(1012)
    wait_for_relays(page, relays, 2)
    second = relays[1]
    assert json.loads(second.sent[0]) == {"resume": max(first.received_seqs())}
    page.wait_for_selector(".output >> text=step-4", timeout=WAIT_MS)
    assert_complete_log(page)

    # A frame that would leave a gap is refused and the page starts over from what it shows.
    bogus = '<div hx-swap-oob="beforeend:#events"><article id="event-9999" data-seq="9999">x</article></div>'
    second.page_side.send(bogus)
    wait_for_relays(page, relays, 3)
    page.wait_for_selector(".output >> text=step-5", timeout=WAIT_MS)
    assert page.locator("#event-9999").count() == 0
    third = relays[2]
    assert third.received_seqs()[0] == json.loads(third.sent[0])["resume"] + 1
    assert_complete_log(page)

    # A reload mid-run: the server renders what exists, the socket resumes after it.
    page.reload()
    wait_for_status(page, "finished")
    assert_complete_log(page)
    outputs = page.locator(".event-tool-result .output").all_inner_texts()
    assert [o.splitlines()[0] for o in outputs] == [f"step-{i}" for i in range(1, 9)]
    assert page.locator(".event-message-agent >> text=all steps done").count() == 1
    wait_for_relays(page, relays, 4)


def test_pause_on_a_finished_conversation_shows_a_conflict(page):
    start_conversation(page, _slow_script(1), "scripted")
    wait_for_status(page, "finished")
    page.evaluate("document.querySelector('#controls button.pause').disabled = false")
    page.click("#controls button.pause")
    notice = page.wait_for_selector("#controls .notice")
    assert "not running" in notice.inner_text()
