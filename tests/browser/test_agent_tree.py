"""The agent tree in a real browser against a real server and worker: a scripted parent
delegates to two children; the Agents section appears and follows them live over the socket,
Stop on one child stops only that child, and the parent still finishes with the other's answer.
The page with its tree and a child's page with its breadcrumb pass axe, wide and at 390 px.

The server is test_live_run's embedded one (its in-process worker runs the children in
parallel threads); the model is the built-in `scripted` one, children playing their prompts.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.browser import WAIT_MS
from tests.browser import test_accessibility as a11y
from tests.browser import test_live_run as live
from tests.browser.test_live_run import DETAIL_URL, start_conversation, wait_for_status

pytestmark = pytest.mark.browser

server = live.server
browser = live.browser
page = live.page

CHILD = json.dumps(
    {
        "script": [
            {"tool": "terminal", "args": {"command": "sleep 4"}},
            {"tool": "finish", "args": {"message": "child done"}},
        ]
    }
)
PARENT = json.dumps(
    {
        "script": [
            {"tool": "delegate",
             "args": {"tasks": [{"name": "a", "prompt": CHILD}, {"name": "b", "prompt": CHILD}]}},
            {"tool": "finish", "args": {"message": "done"}},
        ]
    }
)  # fmt: skip


def node(page, name: str):
    """The tree's item for the child named `name` (its own row, not its descendants')."""
    return page.locator(
        "#agent-tree .agent-node", has=page.locator(f'a.agent-name:text-is("{name}")')
    )


def test_the_tree_follows_the_children_and_stops_one(page):
    start_conversation(page, PARENT, "scripted")
    page.evaluate("window.__sameDocument = true")  # everything below arrives over the socket
    parent_url = page.url

    # Both children appear, running, without a reload.
    page.wait_for_selector("#agent-tree:not([hidden]) .agent-node >> nth=1")
    assert page.locator("#agent-tree h2").inner_text() == "Agents"
    for name in ("a", "b"):
        row = node(page, name)
        row.locator(".badge.status-running").wait_for()
        assert row.locator(".agent-type").inner_text() == "general"
    wait_for_status(page, "waiting_for_subagents")

    # The tree updates while they run: their first step (the sleep) is counted.
    for name in ("a", "b"):
        node(page, name).locator(".agent-stats", has_text=re.compile(r"^1 step ")).wait_for()

    # Stop one child: only it stops; the socket redraws its node as paused.
    b_href = node(page, "b").locator("a.agent-name").get_attribute("href")
    node(page, "a").get_by_role("button", name="Stop a").click()
    node(page, "a").locator(".badge.status-paused").wait_for(timeout=15_000)
    assert node(page, "b").locator(".badge.status-running").count() == 1
    assert node(page, "a").get_by_role("button", name="Stop a").count() == 0

    # b finishes, the parent reads both results and finishes too.
    node(page, "b").locator(".badge.status-finished").wait_for(timeout=WAIT_MS)
    wait_for_status(page, "finished", timeout=WAIT_MS)
    assert node(page, "a").locator(".badge.status-paused").count() == 1
    assert page.evaluate("window.__sameDocument") is True
    settled = page.locator(".event-subagents-settled")
    settled.wait_for()
    assert page.url == parent_url

    # The child's page links back to its parent.
    page.goto(b_href)
    crumbs = page.get_by_role("navigation", name="Parent conversations")
    assert crumbs.get_by_role("link").count() == 1
    crumbs.get_by_role("link").click()
    page.wait_for_url(parent_url)


def test_the_tree_and_the_breadcrumb_are_accessible(browser, server):
    context = browser.new_context(
        base_url=server, viewport={"width": a11y.WIDE, "height": 900}, bypass_csp=True
    )
    try:
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        a11y._log_in(page)
        start_conversation(page, PARENT, "scripted")
        page.wait_for_selector("#agent-tree:not([hidden]) .agent-node >> nth=1")
        found = a11y._violations(page, "agent tree (running)")
        wait_for_status(page, "finished", timeout=60_000)
        page.wait_for_selector("#agent-tree .status-finished >> nth=1")
        found += a11y._violations(page, "agent tree (finished)")
        page.goto(node(page, "a").locator("a.agent-name").get_attribute("href"))
        page.wait_for_url(DETAIL_URL)
        page.get_by_role("navigation", name="Parent conversations").wait_for()
        found += a11y._violations(page, "a child with its breadcrumb")
        a11y._assert_none(found)
    finally:
        context.close()
