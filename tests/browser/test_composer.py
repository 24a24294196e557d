"""The composers in a real browser: Ctrl/Cmd+Enter sends, focus lands in the message box,
empty or too-long text is refused in the page with a message before anything is sent, and
the server's answer to a body over the upload limit is a message that leaves the text in place.

Uses the embedded server and Chromium fixtures of test_live_run.
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from orchestration.services import MAX_PROMPT_CHARS
from tests.browser import test_live_run as live
from tests.browser.test_live_run import DETAIL_URL, start_conversation, wait_for_status

pytestmark = pytest.mark.browser

server = live.server
browser = live.browser
page = live.page

SAY_HI = json.dumps({"script": [{"say": "hi"}]})


def test_ctrl_enter_starts_and_sends_and_focus_stays_in_the_composer(page):
    prompt = page.locator("#id_prompt")
    expect(prompt).to_be_focused()
    prompt.fill(SAY_HI)
    page.select_option("#id_model", "scripted")
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


PASTE = """(el, text) => {
  const data = new DataTransfer();
  data.setData("text/plain", text);
  el.dispatchEvent(new ClipboardEvent("paste", {clipboardData: data, bubbles: true, cancelable: true}));
}"""

SET_WITH_INPUT = """(el, text) => {
  el.value = text;
  el.dispatchEvent(new Event("input", {bubbles: true}));
}"""


def _refuses_bad_text(page, field, noun: str) -> None:
    """`field` is a composer's text box; nothing it refuses may reach the server."""
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    problem = field.locator("xpath=following-sibling::p[contains(@class, 'composer-problem')]")
    expect(field).to_have_attribute("maxlength", str(MAX_PROMPT_CHARS))
    expect(field).to_have_attribute("required", "")

    field.fill("")
    field.press("Control+Enter")
    expect(problem).to_have_text(f"Write a {noun} first.")
    field.fill("  \n ")
    field.press("Control+Enter")
    expect(problem).to_have_text(f"Write a {noun} first.")

    # Set past maxlength by a script (typing, filling and pasting stop at it): refused by key
    # and by click, with or without an input event.
    field.fill("")
    field.evaluate("(el, text) => { el.value = text; }", "x" * (MAX_PROMPT_CHARS + 1))
    field.press("Control+Enter")
    too_long = (
        f"The {noun} is 200,001 characters long; the limit is 200,000. Shorten it before sending."
    )
    expect(problem).to_have_text(too_long)
    field.evaluate(SET_WITH_INPUT, "x" * (MAX_PROMPT_CHARS + 1))
    expect(problem).to_be_hidden()
    field.locator("xpath=ancestor::form//button[@type='submit']").click()
    expect(problem).to_have_text(too_long)
    expect(field).to_have_attribute("aria-invalid", "true")

    # A paste that would not fit is refused whole rather than cut short.
    field.fill("abc")
    field.evaluate(PASTE, "y" * MAX_PROMPT_CHARS)
    expect(problem).to_have_text(
        f"Not pasted: the {noun} would be 200,003 characters long; the limit is 200,000."
    )
    expect(field).to_have_value("abc")
    field.fill("x" * MAX_PROMPT_CHARS)  # exactly the limit is fine
    expect(problem).to_be_hidden()
    assert posts == []


def test_empty_or_too_long_text_is_refused_before_it_is_sent(page):
    _refuses_bad_text(page, page.locator("#id_prompt"), "prompt")
    start_conversation(page, SAY_HI, "scripted")
    wait_for_status(page, "finished")
    _refuses_bad_text(page, page.locator("#message-text"), "message")
    expect(page.locator(".event-message-user")).to_have_count(1)


def _over_the_upload_limit_keeps_the_text(page, field) -> None:
    # Past the page's own check (maxlength removed), so the server's answer is what shows.
    form = field.locator("xpath=ancestor::form")
    field.evaluate("el => el.removeAttribute('maxlength')")
    text = "z" * (3 * 1024 * 1024)
    field.fill(text)
    for _ in range(2):  # sent again: one message, not two
        field.press("Control+Enter")
        message = form.locator(".request-too-large")
        expect(message).to_have_text(
            "Not sent: this is larger than the 2.5\xa0MB a form may hold. "
            "Shorten the text and send it again."
        )
        expect(message).to_have_count(1)
        expect(form.locator("button[type=submit]")).to_be_enabled()
        assert field.input_value() == text


def test_a_body_over_the_upload_limit_is_refused_in_words_and_the_text_stays(page):
    _over_the_upload_limit_keeps_the_text(page, page.locator("#id_prompt"))
    expect(page.locator("#new-conversation")).to_be_visible()
    start_conversation(page, SAY_HI, "scripted")
    wait_for_status(page, "finished")
    _over_the_upload_limit_keeps_the_text(page, page.locator("#message-text"))
    expect(page.locator(".event-message-user")).to_have_count(1)
