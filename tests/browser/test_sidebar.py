"""The conversation sidebar in a real browser: search by title and message text, the status
filter, archiving with confirmation, and deleting the conversation being viewed.

Uses the embedded server and Chromium fixtures of test_live_run.
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.browser import test_live_run as live
from tests.browser.test_live_run import start_conversation, wait_for_status

pytestmark = pytest.mark.browser

server = live.server
browser = live.browser
page = live.page


def said(text: str) -> str:
    return json.dumps({"script": [{"say": text}]})


def rows(page) -> list[str]:
    return [t.strip() for t in page.locator("#sidebar-rows .sidebar-row a").all_inner_texts()]


def test_search_filter_archive_and_delete_from_the_sidebar(page):
    start_conversation(page, said("the zebra report is ready"), "scripted")
    wait_for_status(page, "finished")
    first_url = page.url
    page.goto("/")
    start_conversation(page, said("nothing special"), "scripted")
    wait_for_status(page, "finished")

    sidebar = page.locator(".layout-sidebar")
    assert len(rows(page)) >= 2
    sidebar.locator("#sidebar-q").fill("zebra")  # only in the first run's message text
    expect(page.locator("#sidebar-rows .sidebar-row")).to_have_count(1)
    sidebar.locator("#sidebar-q").fill("")
    sidebar.locator("#sidebar-status").select_option("error")
    page.wait_for_selector("#sidebar-rows .empty")
    sidebar.locator("#sidebar-status").select_option("")
    expect(page.locator("#sidebar-rows .sidebar-row")).to_have_count(2)

    first_id = first_url.rstrip("/").rsplit("/", 1)[-1]
    first_row = page.locator(f"#sidebar-rows .sidebar-row:has(a[href*='{first_id}'])")
    page.once("dialog", lambda dialog: dialog.accept())  # the confirmation
    first_row.hover()
    first_row.get_by_role("button", name="Archive").click()
    expect(page.locator(f"#sidebar-rows a[href*='{first_id}']")).to_have_count(0)
    sidebar.locator("input[name=archived]").check()
    page.wait_for_selector(f"#sidebar-rows a[href*='{first_id}']")

    # Deleting the conversation on screen takes the page back to the list.
    current = page.locator("#sidebar-rows .sidebar-row.current")
    sidebar.locator("input[name=archived]").uncheck()
    page.wait_for_selector("#sidebar-rows .sidebar-row.current")
    page.once("dialog", lambda dialog: dialog.accept())
    current.hover()
    current.get_by_role("button", name="Delete").click()
    page.wait_for_url(lambda url: "/conversations/" not in url)
    assert page.goto(first_url).status == 200  # archived, not deleted
