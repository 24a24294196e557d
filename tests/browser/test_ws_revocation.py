"""Access withdrawn while a conversation page is open: its socket closes and the page says why.

Through the real server (uvicorn, the embedded channel layer): logging out in another tab sends
the access hint from the logout request's thread to the page's socket.
"""

from __future__ import annotations

import pytest

from tests.browser import test_live_run as live
from tests.browser.test_live_run import start_conversation, wait_for_status

pytestmark = pytest.mark.browser

server = live.server
browser = live.browser
page = live.page


def test_logging_out_elsewhere_closes_the_open_page_socket(page, server):  # noqa: F811
    start_conversation(page, "Say hello.", "demo")
    wait_for_status(page, "finished")
    page.wait_for_selector("#live-indicator[data-state=open]")

    other_tab = page.context.new_page()
    other_tab.goto("/")
    other_tab.click(".topnav form[action$='/logout/'] button")
    other_tab.wait_for_url(lambda url: "/logout" in url or "/login" in url)

    page.wait_for_selector("#live-indicator[data-state=closed]", timeout=5_000)
    assert page.locator("#live-indicator").inner_text() == "signed out"
