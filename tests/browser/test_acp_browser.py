"""An external (ACP) agent in a real browser: pick the fixture agent in the new-conversation
form, watch its text stream in, answer its permission request with one of its own options, and
find the file it wrote.

The server is test_live_run's embedded one (its own SQLite, the in-process worker, which also
consumes the "acp" queues), started here with CANVAS_ACP_AGENTS in its environment: a separate
process does not see pytest-django's `settings`. The agent is tests/acp_bridge/agent_fixture.py
in the sandbox; Chromium is Debian's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.acp_bridge.turns import FIXTURE, fixture_profile
from tests.browser import test_live_run as live
from tests.browser.test_live_run import DETAIL_URL, wait_for_status
from tests.embedded_server import prepared_var

pytestmark = pytest.mark.browser

browser = live.browser
page = live.page  # logged in as demo, against the `server` below

WORKSPACE = "acp-notes"
SCREENSHOT = Path("/tmp/ui-acp-approval.png")
FORM_SCREENSHOT = Path("/tmp/ui-agent-picker.png")

BUBBLE_SPY = """
(() => {
  // Every live bubble ever added, kept after the stored row replaces it.
  window.__bubbles = [];
  new MutationObserver((records) => {
    for (const record of records) {
      for (const node of record.addedNodes) {
        if (!(node instanceof Element)) continue;
        const found = node.matches(".live-bubble") ? [node] : node.querySelectorAll(".live-bubble");
        window.__bubbles.push(...found);
      }
    }
  }).observe(document, { childList: true, subtree: true });
})();
"""


@pytest.fixture(scope="module")
def var_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("embedded-acp")


@pytest.fixture(scope="module")
def server(var_dir) -> Iterator[str]:
    """test_live_run's embedded server, with the fixture agent as a site profile."""
    env = live._embedded_env(var_dir, CANVAS_ACP_AGENTS=json.dumps({FIXTURE: fixture_profile()}))
    manage = [sys.executable, "manage.py"]
    prepared_var(var_dir)
    port = live._free_port()
    log = var_dir / "server.log"
    url = f"http://127.0.0.1:{port}"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [*manage, "serve", "--host", "127.0.0.1", "--port", str(port)], cwd=live.REPO,
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        live._VAR_DIRS[url] = var_dir
        try:
            live._wait_for_port(port, proc, log)
            yield url
        finally:
            live._VAR_DIRS.pop(url, None)
            live.stop_server(proc)


def bubbles(page, kind: str) -> list[str]:
    """The text of every live bubble of `kind` (message, thought, tool) the page has shown."""
    return page.evaluate(
        "kind => window.__bubbles.filter(b => b.classList.contains('live-' + kind))"
        ".map(b => b.querySelector('.live-text').textContent)",
        kind,
    )


def test_the_fixture_agent_edits_a_file_after_its_own_allow_option(page, var_dir):
    page.add_init_script(BUBBLE_SPY)
    page.goto("/")

    # The picker offers our agent (the default) and the fixture; picking it hides the model.
    picker = page.locator("#id_agent")
    assert picker.input_value() == ""
    assert page.locator("#id_model").is_visible()
    labels = picker.locator("option").all_inner_texts()
    assert labels[0].startswith("Our agent") and f"{FIXTURE} (site profile)" in labels
    picker.select_option(FIXTURE)
    assert page.locator("#id_model").is_hidden()
    page.fill("#id_prompt", "edit notes.txt hello")
    page.fill("#id_workspace", WORKSPACE)
    page.locator("#new-conversation").screenshot(path=str(FORM_SCREENSHOT))
    page.click("#new-conversation button[type=submit]")
    page.wait_for_url(DETAIL_URL)
    assert page.locator(".conversation-agent").inner_text() == f"Agent {FIXTURE}"

    # The agent's edit waits for a person, with the agent's three options as buttons.
    card = page.locator(".approval-card:not(.is-decided)")
    card.wait_for(timeout=60_000)
    wait_for_status(page, "waiting_for_confirmation")
    assert "Edit notes.txt" in card.locator(".tool-title").inner_text()
    options = card.locator("button.option-button")
    named = {
        options.nth(i).get_attribute("data-option-id"): options.nth(i).inner_text()
        for i in range(options.count())
    }
    assert named == {"yes": "Allow", "always": "Always allow", "no": "Reject"}
    card.scroll_into_view_if_needed()
    card.screenshot(path=str(SCREENSHOT))

    # A reload while it waits: the call still says it is held, the card is still there.
    page.reload()
    card.wait_for()
    expect(page.locator(".event-tool-call .tag.held")).to_have_text("held for approval")
    # An agent's long option name (Claude's adapter) wraps inside the card on a phone.
    page.set_viewport_size({"width": 390, "height": 844})
    always = card.locator('button.option-button[data-option-id="always"]')
    always.evaluate("el => { el.textContent = 'Always Allow for this project (until restart)'; }")
    card_box, box = card.bounding_box(), always.bounding_box()
    assert box["x"] + box["width"] <= card_box["x"] + card_box["width"], (box, card_box)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.set_viewport_size({"width": 1200, "height": 900})
    allow = card.locator('button.option-button[data-option-id="yes"]')
    assert allow.inner_text() == "Allow"
    allow.click()

    # Granted with that option: the file is written, the call completes with its diff, and
    # the agent's closing words arrive live, then as their row.
    decision = page.locator(".event-action-decision", has_text="option yes")
    decision.wait_for(timeout=60_000)
    assert "Approved" in decision.inner_text() and "demo" in decision.inner_text()
    message = page.locator(".event-message-agent", has_text="edited notes.txt")
    message.wait_for(timeout=60_000)
    wait_for_status(page, "finished")
    call = page.locator(".event-tool-call", has_text="Edit notes.txt")
    assert call.locator(".tool-title").inner_text() == "Edit notes.txt"
    diff = call.locator(".file-diff")
    diff.wait_for()
    assert "+hello" in diff.inner_text().replace(" ", "")
    assert any("edited notes.txt" in text for text in bubbles(page, "message"))
    assert page.locator("#live-stream .live-bubble").count() == 0  # each went with its row
    assert page.locator(".approval-card:not(.is-decided)").count() == 0

    written = list(var_dir.rglob(f"{WORKSPACE}/notes.txt"))
    assert len(written) == 1, written
    assert written[0].read_text() == "hello"

    # A follow-up turn in the same session streams text and a thought while it runs.
    page.fill("#message-text", "stream")
    page.click("#message-form button[type=submit]")
    page.locator(".event-message-agent", has_text="one two three").wait_for(timeout=60_000)
    wait_for_status(page, "finished")
    assert "".join(bubbles(page, "message")).count("one two three") == 1
    assert "thinking" in bubbles(page, "thought")
    thought = page.locator(".event-message-thought")
    assert thought.locator(".thought-text").text_content() == "thinking"  # folded until opened
    thought.locator("summary").click()
    assert thought.locator(".thought-text").inner_text() == "thinking"
    assert page.locator(".event-tool-call .tool-title", has_text="Read notes").count() == 1
    assert page.locator("#live-stream .live-bubble").count() == 0
