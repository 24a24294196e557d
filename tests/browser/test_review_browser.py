"""The review page in a real browser, under the site's CSP: after a run edits files in a
workspace, Review all changes (from the Changes tab) shows them full width; n / p move
between files, a file collapses, comments are added on a line and on a range, survive a switch
to the unified layout, and Send review posts them as one user message naming file:line, which
the scripted model then answers. axe-core finds no serious or critical violation in either
layout, at 1280 px and at 390 px, where the page is no wider than the screen.

With CANVAS_SCREENSHOTS=1 the wide page, with a comment, is saved to docs/screenshots/review.png.
Uses test_live_run's embedded server and Chromium, test_csp's CSP-watching page and
test_accessibility's axe (in a context of its own that bypasses the CSP to inject axe).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser import WAIT_MS
from tests.browser import test_accessibility as a11y
from tests.browser import test_live_run as live
from tests.browser.test_csp import csp_page  # noqa: F401 - the fixture
from tests.browser.test_live_run import DETAIL_URL, wait_for_status
from tests.runs import script

pytestmark = pytest.mark.browser

server = live.server
browser = live.browser
context = a11y.context

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "review.png"
FINISH = {"tool": "finish", "args": {"message": "done"}}
APP = 'def total(items):\n    """Add them up."""\n    return sum(items)\n'
FIRST = script(
    {"tool": "file_editor", "args": {"command": "create", "path": "app.py", "file_text": APP}},
    {"tool": "terminal", "args": {"command": "printf '# Shop\\n' > README.md"}},
    FINISH,
)
"""Writes the files the second run starts from."""
ANSWER = "Thanks for the review: total() now skips None."
SECOND = script(
    {
        "tool": "file_editor",
        "args": {
            "command": "str_replace",
            "path": "app.py",
            "old_str": "    return sum(items)\n",
            "new_str": "    # Skip the gaps.\n    return sum(i for i in items if i)\n",
        },
    },
    {
        "tool": "file_editor",
        "args": {
            "command": "create",
            "path": "tests/test_app.py",
            "file_text": "from app import total\n\n\ndef test_total():\n    assert total([1, 2]) == 3\n",
        },
    },
    {"tool": "terminal", "args": {"command": "printf 'Adds numbers.\\n' >> README.md"}},
    FINISH,
    {"say": ANSWER},
)
"""Edits app.py, adds a test and a README line, finishes, then answers the review."""
STALE = """() => {
  const key = "canvas-review:" + document.getElementById("review").dataset.conversation;
  const comments = JSON.parse(sessionStorage.getItem(key));
  comments.push({path: "app.py", side: "new", start: 99, end: 99, body: "Stale."});
  sessionStorage.setItem(key, JSON.stringify(comments));
}"""
REVIEW_URL = re.compile(r"/conversations/[0-9a-f-]{36}/review/(\?mode=\w+)?$")


def _start_in_shop(page, prompt: str) -> None:
    page.goto("/")
    page.fill("#id_prompt", prompt)
    page.select_option("#id_model", "scripted")
    page.fill("#id_workspace", "shop")
    page.click("#new-conversation button[type=submit]")
    page.wait_for_url(DETAIL_URL)


def _comment(page, path: str, side: str, line: int, body: str, *, through: int | None = None):
    file = page.locator(f".review-file[data-path='{path}']")
    file.locator(f".ln-button[data-side='{side}'][data-line='{line}']").click()
    if through is not None:
        file.locator(f".ln-button[data-side='{side}'][data-line='{through}']").click(
            modifiers=["Shift"]
        )
    form = file.locator(".comment-form")
    form.locator("textarea").fill(body)
    form.locator("button[type=submit]").click()
    expect(form).to_have_count(0)


def _active_path(page) -> str:
    return page.evaluate("() => document.activeElement.closest('.review-file').dataset.path")


def test_comment_on_lines_and_send_the_review_to_the_agent(csp_page, context, server):  # noqa: F811
    page = csp_page
    a11y._log_in(page)
    _start_in_shop(page, FIRST)
    wait_for_status(page, "finished")
    _start_in_shop(page, SECOND)
    wait_for_status(page, "finished")
    detail = page.url

    page.locator("#panel-body .review-link").click()
    page.wait_for_url(REVIEW_URL)
    review = page.url
    files = page.locator(".review-file")
    assert files.evaluate_all("els => els.map(e => e.dataset.path)") == [
        "README.md", "app.py", "tests/test_app.py",
    ]  # fmt: skip
    # Split: the replaced line on the left, its two new lines on the right, coloured.
    app = page.locator(".review-file[data-path='app.py']")
    assert app.locator("td.code.dl-del").inner_text() == "    return sum(items)"
    assert app.locator("td.code.dl-add").all_inner_texts() == [
        "    # Skip the gaps.", "    return sum(i for i in items if i)",
    ]  # fmt: skip
    assert app.locator("td.code.dl-add .c1").inner_text() == "# Skip the gaps."
    assert app.locator(".ln-button[data-side='new']").evaluate_all(
        "els => els.map(e => Number(e.dataset.line))"
    ) == [1, 2, 3, 4]

    # n / p between files; a file collapses and opens again.
    page.locator("h1").click()
    page.keyboard.press("n")
    assert _active_path(page) == "README.md"
    page.keyboard.press("n")
    page.keyboard.press("n")
    assert _active_path(page) == "tests/test_app.py"
    page.keyboard.press("p")
    assert _active_path(page) == "app.py"
    app.locator("summary").click()
    expect(app).not_to_have_attribute("open", "")
    app.locator("summary").click()
    expect(app).to_have_attribute("open", "")

    # A comment on one line and one on a range; they survive the switch to unified.
    _comment(page, "app.py", "new", 4, "Why skip 0 too? <b>not bold</b>")
    _comment(page, "tests/test_app.py", "new", 4, "Test None as well.", through=5)
    assert page.locator(".comment-row .comment-where").all_inner_texts() == [
        "app.py:4", "tests/test_app.py:4-5",
    ]  # fmt: skip
    assert page.locator(".comment-row .comment-body").first.inner_text() == (
        "Why skip 0 too? <b>not bold</b>"
    )
    page.locator(".review-modes a", has_text="Unified").click()
    page.wait_for_url(REVIEW_URL)
    assert page.locator("table.diff-unified").count() == 3
    expect(page.locator("#review-count")).to_have_text("2 comments")
    assert page.locator(".comment-row").count() == 2

    # A comment on a line the diff no longer holds (as when the agent changed the file since):
    # listed in the form, refused by Send review with the reason, removable, nothing lost.
    page.evaluate(STALE)
    page.reload()
    expect(page.locator("#review-unplaced .comment-where")).to_have_text("app.py:99")
    page.locator("#review-send").click()
    expect(page.locator("#review-error")).to_contain_text("app.py:99: line 99 is not in the diff")
    expect(page.locator("#review-count")).to_have_text("3 comments")
    assert page.locator(".comment-row").count() == 2
    page.locator("#review-unplaced .comment-remove").click()
    expect(page.locator("#review-unplaced")).to_be_hidden()
    page.fill("#review-note", "Nice work otherwise.")
    page.locator("#review-send").click()

    # One message naming file:line; the agent reads it and answers.
    page.wait_for_url(detail)
    message = page.locator(".event-message-user", has_text="app.py:4")
    expect(message).to_contain_text("tests/test_app.py:4-5")
    expect(message).to_contain_text("Why skip 0 too? <b>not bold</b>")
    expect(message.locator("blockquote").first).to_contain_text("Nice work otherwise.")
    expect(page.locator(".event-message-agent", has_text=ANSWER)).to_have_count(1)
    wait_for_status(page, "finished")
    page.goto(review)  # sent: nothing is pending any more
    expect(page.locator("#review-count")).to_have_text("No comments yet")

    # Accessibility and width, in both layouts, with a comment being written and one added.
    check = context.new_page()
    check.set_default_timeout(WAIT_MS)
    a11y._log_in(check)
    check.goto(review.split("?")[0] + "?mode=split")
    _comment(check, "app.py", "new", 3, "Keep this docstring?")
    check.locator(".review-file[data-path='README.md'] .ln-button[data-line='2']").click()
    if os.environ.get("CANVAS_SCREENSHOTS") == "1":
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        check.set_viewport_size({"width": a11y.WIDE, "height": 1000})
        check.screenshot(path=str(SCREENSHOT), full_page=True)
    found = a11y._violations(check, "review (split)")
    check.goto(review.split("?")[0] + "?mode=unified")
    found += a11y._violations(check, "review (unified)")
    a11y._assert_none(found)
