"""The composers in a real browser: Ctrl/Cmd+Enter sends, focus lands in the message box.

Uses the embedded server and Chromium fixtures of test_live_run.
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.browser import test_live_run as live
from tests.browser.test_live_run import DETAIL_URL, wait_for_status

pytestmark = pytest.mark.browser

server = live.server
browser = live.browser
page = live.page

SAY_HI = json.dumps({"script": [{"say": "hi"}]})


def test_ctrl_enter_starts_and_sends_and_focus_stays_in_the_composer(page):
    prompt = page.locator("#id_prompt")
    expect(prompt).to_be_focused()
    prompt.fill(SAY_HI)
    page.fill("#id_model", "scripted")
    prompt.focus()
    prompt.press("Control+Enter")
    page.wait_for_url(DETAIL_URL)

    # The conversation page opens ready for the next message.
    box = page.locator("#message-text")
    expect(box).to_be_focused()
    wait_for_status(page, "finished")

    # Cmd+Enter (Meta) sends as well; the fresh box is focused again after the send.
    box.fill("Ctrl Enter follow-up")
    box.press("Control+Enter")
    expect(page.locator(".event-message-user", has_text="Ctrl Enter follow-up")).to_have_count(1)
    expect(box).to_have_value("")
    expect(box).to_be_focused()
    box.fill("Meta Enter follow-up")
    box.press("Meta+Enter")
    expect(page.locator(".event-message-user", has_text="Meta Enter follow-up")).to_have_count(1)
    expect(box).to_be_focused()
    # One message per key press: nothing was sent twice.
    expect(page.locator(".event-message-user")).to_have_count(3)
