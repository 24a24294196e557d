"""A real browser on the team pages: create a team, switch to it, make a token and see it once.

Reuses the embedded server, chromium and logged-in page of test_live_run (one server per
module, its own SQLite file), so nothing here downloads a browser or touches the test database.
"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from tests.browser.test_live_run import browser, page, server, start_conversation  # noqa: F401

pytestmark = pytest.mark.browser

SCREENSHOTS = Path("/tmp")
TEAM_URL = re.compile(r"/teams/\d+/$")


def _api_conversations(server_url: str, token: str) -> list[dict]:
    request = urllib.request.Request(
        f"{server_url}/api/conversations", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_create_team_switch_to_it_and_make_a_token(page, server):  # noqa: F811
    # Something in the demo team first, so an empty list after switching means something.
    start_conversation(page, "Say hello from the demo team.", "demo")

    page.goto("/teams/")
    page.fill("#id_name", "Browser team")
    page.click("#team-create button[type=submit]")
    page.wait_for_url(TEAM_URL)
    assert page.locator("h1").inner_text() == "Browser team"
    assert page.locator("#members tbody tr").count() == 1
    assert page.locator("#member-add").is_visible()  # the creator owns it
    page.screenshot(path=str(SCREENSHOTS / "ui-team.png"), full_page=True)

    page.goto("/")
    assert page.locator("#conversation-rows tr", has_text="Say hello").count() == 1
    page.select_option("#team-switcher", label="Browser team")
    page.wait_for_selector("#conversation-rows .empty")
    assert "No conversations in this team yet" in page.locator("#conversation-rows").inner_text()
    assert "Browser team" in page.locator("h1").inner_text()
    assert page.locator("#team-switcher option:checked").inner_text() == "Browser team"

    page.click(".mainnav >> text=Tokens")
    page.fill("#id_name", "browser test")
    page.click("#token-create button[type=submit]")
    box = page.wait_for_selector(".new-token")
    assert "won't see it again" in box.inner_text()
    raw = page.input_value("#new-token-value")
    assert raw.startswith("cnv_")
    page.click(".new-token button")
    page.wait_for_selector(".new-token button >> text=Copied")
    page.screenshot(path=str(SCREENSHOTS / "ui-tokens.png"), full_page=True)

    # The token works against the API, as the demo user: it sees the demo team's conversation.
    titles = [c["title"] for c in _api_conversations(server, raw)]
    assert any(t.startswith("Say hello") for t in titles), titles

    page.reload()
    assert page.locator(".new-token").count() == 0
    assert raw not in page.content()
    assert page.locator("#tokens tbody tr", has_text="browser test").count() == 1
