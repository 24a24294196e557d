"""The conversation page's three regions and its side panel in a real browser.

Two scripted runs share the workspace "proj": the first writes files, the second (whose
baseline is the first one's result) deletes, creates and edits some with the terminal and the
file editor. Its Changes tab lists them with the right counts and diffs, the Files tab shows a
file highlighted, the archive downloads and holds the files, and the page fits 1280 and 390 px
wide screens. Uses the embedded server and Chromium fixtures of test_live_run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser import test_live_run as live
from tests.browser.test_live_run import DETAIL_URL, wait_for_status
from tests.canvas.test_workspace_api import AFTER_RUN, EDITS, FINISH, archived_files
from tests.runs import script

pytestmark = pytest.mark.browser

server = live.server
browser = live.browser
page = live.page

SCREENSHOTS = Path("/tmp")


FIRST = script(
    {
        "tool": "terminal",
        "args": {
            "command": "printf 'x = 1\\ny = 2\\n' > edit.py && echo 'gone soon' > old.txt"
            " && echo '# unchanged' > same.md"
        },
    },
    FINISH,
)
"""Writes the files the API test's workspace starts with."""
WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.1; done; rm go"
COLOURED = "printf '\\033[31mred\\033[0m plain\\n'"
SECOND = script(
    {"tool": "terminal", "args": {"command": WAIT_FOR_GO}},
    *EDITS,
    {"tool": "terminal", "args": {"command": COLOURED}},
    FINISH,
)
"""Waits until the test says go (the page is open and shows no change yet), then makes the API
test's changes on top of FIRST's files and prints a coloured word."""

EXPECTED = {  # path: (status letter, added, removed)
    "edit.py": ("M", "+1", "−1"),
    "notes.txt": ("A", "+3", "−0"),
    "old.txt": ("D", "+0", "−1"),
    "src/made.py": ("A", "+1", "−0"),
}


def _start_in_proj(page, prompt: str) -> None:
    page.goto("/")
    page.fill("#id_prompt", prompt)
    page.select_option("#id_model", "scripted")
    page.fill("#id_workspace", "proj")
    page.click("#new-conversation button[type=submit]")
    page.wait_for_url(DETAIL_URL)


SHOWN_CHANGES = """() => Object.fromEntries(
  Array.from(document.querySelectorAll("#panel-body .change"), (row) => [
    row.querySelector(".change-path").innerText,
    [row.querySelector(".change-status").innerText,
     ...row.querySelector(".change-counts").innerText.split(/\\s+/)],
  ]))"""
"""The Changes tab's rows as {path: [status letter, added, removed]}, read in one go."""


def _box(page, selector: str) -> dict:
    return page.eval_on_selector(
        selector,
        "el => { const r = el.getBoundingClientRect(); return {x: r.x, y: r.y, right: r.right, width: r.width}; }",
    )


def _assert_fits(page, width: int) -> dict[str, dict]:
    page.set_viewport_size({"width": width, "height": 900})
    page.wait_for_function("w => document.documentElement.clientWidth === w", arg=width)
    scroll_width = page.evaluate("() => document.scrollingElement.scrollWidth")
    assert scroll_width <= width, f"the page is {scroll_width}px wide at {width}px"
    boxes = {}
    for name, selector in (
        ("sidebar", ".layout-sidebar"),
        ("stream", ".layout-stream"),
        ("panel", "#side-panel"),
    ):
        box = boxes[name] = _box(page, selector)
        assert box["x"] >= 0 and box["right"] <= width, (width, name, box)
    page.screenshot(path=str(SCREENSHOTS / f"ui-layout-{width}.png"), full_page=True)
    return boxes


def test_changes_files_and_archive_after_a_run_and_the_layout_fits(page, server, tmp_path):
    _start_in_proj(page, FIRST)
    wait_for_status(page, "finished")
    _start_in_proj(page, SECOND)
    [proj] = (live._VAR_DIRS[server] / "workspaces").glob("team-*/proj")

    # Changes: none while the run waits; every file with its counts once the tab has followed
    # the run's results live, without a reload.
    page.locator(".event-tool-call .terminal-command", has_text="while").wait_for()
    page.locator("#panel-body .panel-changes", has_text="No changes").wait_for()
    page.evaluate("window.__sameDocument = true")
    (proj / "go").touch()
    expected = {path: list(shown) for path, shown in EXPECTED.items()}
    page.wait_for_function(
        f"expected => JSON.stringify(({SHOWN_CHANGES})()) === JSON.stringify(expected)",
        arg=expected,
    )
    wait_for_status(page, "finished")
    assert page.evaluate(SHOWN_CHANGES) == expected
    assert page.evaluate("window.__sameDocument") is True
    page.locator("#panel-body details[data-path='edit.py'] summary").click()
    diff = page.locator("#panel-body details[data-path='edit.py'] .panel-diff")
    assert diff.locator(".pd-del").inner_text() == "-y = 2"
    assert diff.locator(".pd-add").inner_text() == "+y = 3"
    page.locator("#panel-body details[data-path='old.txt'] summary").click()
    assert (
        page.locator("#panel-body details[data-path='old.txt'] .pd-del").inner_text()
        == "-gone soon"
    )

    # The archive holds the workspace as it is now.
    with page.expect_download() as download:
        page.click("#panel-body a[download]")
    saved = tmp_path / "proj.tar.gz"
    download.value.save_as(saved)
    assert archived_files(saved.read_bytes()) == AFTER_RUN

    # Files: into src/, then the file, highlighted and read-only.
    page.click("#tab-files")
    page.click("#panel-body .file-list a >> text=src/")
    page.click("#panel-body .file-list a >> text=made.py")
    code = page.locator("#panel-body .file-view .highlight")
    code.wait_for()
    assert code.inner_text().strip() == "print('made')"
    assert code.locator("span.nb", has_text="print").count() == 1
    assert page.locator("#tab-files").get_attribute("aria-selected") == "true"

    # Terminal: the commands as one console, colours as the stream shows them.
    page.click("#tab-terminal")
    page.locator("#panel-body .console").wait_for()
    assert page.locator("#panel-body .console-command").all_inner_texts() == [
        f"$ {WAIT_FOR_GO}",
        "$ rm old.txt && printf 'a\\nb\\nc\\n' > notes.txt",
        f"$ {COLOURED}",
    ]
    red = page.locator("#panel-body .console span.ansi-fg-1")
    expect(red).to_have_text("red")
    expect(red).to_have_css("color", "rgb(255, 123, 114)")  # panels.css, on the dark console
    assert "\x1b" not in page.locator("#panel-body .console").inner_text()

    # Three regions side by side on a wide screen, stacked on a phone, never wider than it.
    page.click("#tab-changes")
    wide = _assert_fits(page, 1280)
    assert (
        wide["sidebar"]["right"]
        <= wide["stream"]["x"]
        < wide["stream"]["right"]
        <= wide["panel"]["x"]
    )
    narrow = _assert_fits(page, 390)
    # On a phone the conversation comes first, its files next, the list of conversations last.
    assert narrow["stream"]["y"] < narrow["panel"]["y"] < narrow["sidebar"]["y"]
    for box in narrow.values():
        assert box["width"] <= 390
