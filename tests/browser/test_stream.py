"""The stream in a real browser: a tool call and its result are one card, long outputs are
clipped with "show all", Markdown is rendered and a model's HTML stays inert, ANSI colours
are classes, and file edits show a diff.

Uses the embedded server and Chromium fixtures of test_live_run.
"""

from __future__ import annotations

import json

import pytest

from tests.browser import WAIT_MS
from tests.browser import test_live_run as live
from tests.browser.test_live_run import (
    assert_complete_log,
    shown_seqs,
    start_conversation,
    wait_for_status,
)

pytestmark = pytest.mark.browser

server = live.server
browser = live.browser
page = live.page

GO = "go-on"
"""The third call waits for this file in its workspace: the test sees the call pending first."""
XSS = (
    "Done: **all steps** ran, see `app.txt`.\n\n"
    "<script>window.__xss = 'script'</script>\n\n"
    '<img src="x" onerror="window.__xss = \'img\'">\n\n'
    "[click](javascript:window.__xss='link')"
)
SCRIPT = json.dumps(
    {
        "script": [
            {"tool": "file_editor",
             "args": {"command": "create", "path": "app.txt", "file_text": "alpha\nbeta\n"}},
            {"tool": "file_editor",
             "args": {"command": "str_replace", "path": "app.txt", "old_str": "beta",
                      "new_str": "gamma"}},
            {"tool": "terminal",
             "args": {"command": f"until [ -e {GO} ]; do sleep 0.1; done; "
                                 "printf '\\033[1;31mred\\033[0m plain\\n'"}},
            {"tool": "terminal", "args": {"command": "seq 1 5000"}},
            {"say": XSS},
        ]
    }
)  # fmt: skip


def _check_cards(page) -> None:
    # Every call is one card with its result inside; no result stands alone.
    calls = page.locator("#events > .event-tool-call")
    assert calls.count() == 4
    for i in range(4):
        assert calls.nth(i).locator(".call-log .tool-result").count() == 1
    assert page.locator("#events > .event-tool-result").count() == 0
    assert page.locator("#events .pending:visible").count() == 0

    # The edit shows as a diff; the old and new strings are not listed again as arguments.
    edit = calls.nth(1)
    assert edit.locator(".diff .diff-del").inner_text().strip() == "-beta"
    assert edit.locator(".diff .diff-add").inner_text().strip() == "+gamma"
    assert edit.locator(".arguments").count() == 0

    # ANSI colours are classes (the CSP allows no inline style), the escape codes are gone.
    coloured = calls.nth(2).locator(".output .ansi-fg-1.ansi-bold")
    assert coloured.inner_text() == "red"
    assert "\x1b" not in calls.nth(2).locator(".output").inner_text()
    colour = coloured.evaluate("el => getComputedStyle(el).color")
    assert colour not in ("rgb(36, 41, 47)", "rgb(0, 0, 0)"), colour

    # Markdown is rendered; the model's HTML is text and never runs.
    message = page.locator(".event-message-agent .markdown")
    assert message.locator("strong").inner_text() == "all steps"
    assert message.locator("code").inner_text() == "app.txt"
    assert page.locator("#events img, #events script").count() == 0
    assert "<script>" in message.inner_text()
    assert message.locator("a[href^=javascript]").count() == 0
    assert page.evaluate("window.__xss") is None


def _release(tmp_path_factory, workspace: str, name: str = GO) -> None:
    """Touch `name` in the conversation's workspace (under the embedded server's var
    directory)."""
    base = tmp_path_factory.getbasetemp()
    (found,) = [p for p in base.glob(f"embedded[0-9]*/workspaces/*/{workspace}") if p.is_dir()]
    (found / name).touch()


def test_calls_and_results_are_one_card_with_clipped_output(page, tmp_path_factory):
    start_conversation(page, SCRIPT, "scripted")
    # While the third call runs its card says so; the result then lands inside the same card.
    running = page.locator(".event-tool-call", has_text=GO)
    running.locator(".pending", has_text="Running").wait_for(timeout=60_000)
    _release(tmp_path_factory, page.locator(".workspace code").inner_text())
    running.locator(".call-log .tool-result").wait_for(timeout=WAIT_MS)
    assert running.locator(".pending:visible").count() == 0
    assert running.locator(".tool-result .exit-ok").inner_text() == "exit 0"
    wait_for_status(page, "finished")
    assert_complete_log(page)
    _check_cards(page)

    # 5,000 lines: head and tail only, a small card, and the whole text on demand.
    long = page.locator("#events > .event-tool-call").nth(3)
    output = long.locator(".output")
    shown = output.inner_text().splitlines()  # the terminal adds an "[exit code: 0]" line
    assert shown[:2] == ["1", "2"] and "5000" in shown[-3:] and len(shown) < 60
    assert "4951 lines not shown" in output.inner_text()
    assert long.bounding_box()["height"] < 1200
    assert len(page.content()) < 120_000
    long.locator("button.show-all", has_text="Show all 5001 lines").click()
    long.locator(".output-box.is-full").wait_for()
    full = long.locator(".output").inner_text().splitlines()
    assert full[:2] == ["1", "2"] and full[-2:] == ["5000", "[exit code: 0]"]
    assert full[:5000] == [str(i) for i in range(1, 5001)]
    # The full output scrolls inside its box; the page does not grow by 5,000 lines.
    assert long.bounding_box()["height"] < 1500

    # The page rendered by the server shows the same cards.
    page.reload()
    wait_for_status(page, "finished")
    assert_complete_log(page)
    _check_cards(page)


def test_the_title_reads_in_words_and_renames_inline(page):
    start_conversation(page, json.dumps({"script": [{"say": "hello"}]}), "scripted")
    title = page.locator("#conversation-title h1")
    assert title.inner_text() == "Scripted run: 1 step"
    page.click("#conversation-title button.rename")
    field = page.locator("#conversation-title input[name=title]")
    assert field.input_value() == "Scripted run: 1 step"
    field.fill("   ")
    page.click("#conversation-title button[type=submit]")
    page.locator("#conversation-title .field-error", has_text="at least one word").wait_for()
    field.fill("Greeting check <b>1</b>")
    field.press("Enter")
    page.wait_for_function(
        "() => document.querySelector('#conversation-title h1')?.textContent"
        " === 'Greeting check <b>1</b>'"
    )
    page.reload()
    assert title.inner_text() == "Greeting check <b>1</b>"


def test_a_pause_while_a_command_runs_reads_in_order(page, tmp_path_factory):
    command = "until [ -e paused-go ]; do sleep 0.1; done; echo late-result"
    prompt = json.dumps({"script": [{"tool": "terminal", "args": {"command": command}},
                                    {"say": "after"}]})  # fmt: skip
    start_conversation(page, prompt, "scripted")
    card = page.locator("#events > .event-tool-call", has_text="paused-go")
    card.locator(".pending", has_text="Running").wait_for(timeout=60_000)
    page.click("#controls button.pause")
    wait_for_status(page, "paused")
    stop = page.locator(".event-status-changed .stop-note")
    expected = f"Paused by demo while {command} ran; its result follows."
    assert stop.inner_text() == expected
    assert stop.locator("code").inner_text() == command

    # The step in flight completes: its result lands in its card, and a line where it arrived
    # (after the pause) points there.
    _release(tmp_path_factory, page.locator(".workspace code").inner_text(), "paused-go")
    card.locator(".call-log .tool-result", has_text="late-result").wait_for(timeout=WAIT_MS)
    late = page.locator("#events > .event-result-marker:visible")
    late.wait_for()
    assert "The result arrived" in late.inner_text()
    assert_complete_log(page)

    page.reload()
    wait_for_status(page, "paused")
    assert page.locator(".event-status-changed .stop-note").inner_text() == expected
    assert "arrived: it is in the card above" in late.inner_text()
    assert card.locator(".call-log .tool-result", has_text="late-result").count() == 1


AT_BOTTOM = "() => innerHeight + scrollY >= document.documentElement.scrollHeight - 4"
ANSWER = "**Shipped**: 8 steps ran.\n\n<script>window.__xss = 'answer'</script>"


def test_the_tail_is_followed_until_the_reader_scrolls_up_then_offered(page):
    steps = [
        {"tool": "terminal", "args": {"command": f"sleep 0.3; seq 1 20; echo step-{i}"}}
        for i in range(1, 9)
    ]
    finish = {"tool": "finish", "args": {"message": ANSWER}}
    start_conversation(page, json.dumps({"script": [*steps, finish]}), "scripted")
    jump = page.locator("#jump-latest")

    # At the bottom the page follows what arrives (taller than the window by now).
    page.locator(".output", has_text="step-3").wait_for(timeout=60_000)
    page.wait_for_function(AT_BOTTOM)
    assert page.evaluate("document.documentElement.scrollHeight") > 900 and jump.is_hidden()

    # Scrolled up, the reader stays where they are and is told what arrived below.
    page.evaluate("window.scrollTo(0, 0)")
    jump.wait_for(state="visible", timeout=15_000)
    page.wait_for_function(
        "() => /^([2-9]|\\d\\d+) new events, jump to latest$/"
        ".test(document.getElementById('jump-latest').textContent)"
    )
    assert page.evaluate("scrollY") == 0
    box = jump.bounding_box()
    assert box["y"] > 0 and box["y"] + box["height"] <= 900  # near the bottom, in view

    # The button goes to the tail, and the page follows again.
    jump.click()
    page.wait_for_function(AT_BOTTOM)
    assert jump.is_hidden()
    arrived = len(shown_seqs(page))
    page.wait_for_function(
        "n => document.querySelectorAll('#events > [data-seq]').length > n + 1", arg=arrived
    )
    page.wait_for_function(AT_BOTTOM)
    assert jump.is_hidden()

    # The final answer: once, as Markdown, the model's HTML inert, copyable.
    wait_for_status(page, "finished")
    assert_complete_log(page)
    answer = page.locator("#events .final-answer")
    assert answer.count() == 1
    assert answer.locator(".markdown strong").inner_text() == "Shipped"
    assert "<script>" in answer.locator(".markdown").inner_text()
    assert page.evaluate("window.__xss") is None
    others = page.locator("#events > .event:not(.event-message-user):not(.final-answer)")
    assert others.filter(has_text="Shipped").count() == 0  # not its result, not an argument
    assert answer.locator(".tool-result, pre.output, .arguments").count() == 0
    # Each card, drawn live, forks after its result (its own seq would be refused).
    card = page.locator("#events > .event-tool-call").first
    seq = int(card.get_attribute("data-seq"))
    assert card.locator(".fork-here").get_attribute("hx-vals") == f'{{"at_seq": "{seq + 1}"}}'
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    answer.locator("button.copy-answer").scroll_into_view_if_needed()
    scrolled = page.evaluate("scrollY")
    answer.locator("button.copy-answer").click()
    page.wait_for_function(
        "() => document.querySelector('#events .final-answer .copy-answer').textContent"
        " === 'Copied'"
    )
    assert page.evaluate("navigator.clipboard.readText()") == ANSWER  # the Markdown as written
    assert page.evaluate("scrollY") == scrolled
