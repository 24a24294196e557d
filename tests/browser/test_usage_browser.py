"""The team's Usage page in a real browser: after a demo run (and one priced model call added to
its log, as a paid model would write it: the scripted models cost nothing), today's bar holds
the run's cost and tokens, the API at /api/teams/{id}/usage gives the same numbers, and axe-core
finds no serious or critical violation, wide and at 390 px, where the page fits the screen.

Reuses test_live_run's embedded server (its own SQLite, the in-process worker) and Chromium, and
test_accessibility's axe and width checks (its context bypasses the CSP to inject axe).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from tests.browser import WAIT_MS, keep_screenshot
from tests.browser import test_accessibility as a11y
from tests.browser import test_live_run as live
from tests.browser.test_live_run import start_conversation, wait_for_status
from tests.browser.test_team_settings import _demo_team, _tab

pytestmark = pytest.mark.browser

server = live.server
browser = live.browser
context = a11y.context

COST = 0.0123
PRICED_CALL = """
from conversations import store
from conversations.events import AgentMessageEvent, Usage
store.append("{cid}", [AgentMessageEvent(text="priced", usage=Usage(
    prompt_tokens=1000, completion_tokens=200, cost_usd={cost}))])
"""


def test_todays_bar_holds_a_runs_cost_and_the_api_agrees(context, server):
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    a11y._log_in(page)
    start_conversation(page, "Write FizzBuzz and run it.", "demo")
    wait_for_status(page, "finished")
    conversation = re.search(r"/conversations/([0-9a-f-]{36})/", page.url).group(1)
    live.manage(server, "shell", "-c", PRICED_CALL.format(cid=conversation, cost=COST))

    team = _demo_team(page)
    _tab(page, "Usage")
    team_id = int(re.search(r"/teams/(\d+)/", team).group(1))
    answer = page.request.get(f"/api/teams/{team_id}/usage")
    assert answer.ok, answer.text()
    usage = answer.json()
    today = usage["days"][-1]
    assert today["day"] == f"{datetime.now(UTC):%Y-%m-%d}"
    assert today["cost_usd"] == pytest.approx(COST) and today["tokens_in"] >= 1000
    assert today["calls"] >= 2  # the demo run's own calls and the priced one

    bar = page.locator(f"[data-testid=usage-cost-chart] rect.bar[data-day='{today['day']}']")
    assert bar.locator("title").text_content() == f"{today['day']}: $0.0123"
    assert float(bar.get_attribute("height")) > 0
    row = page.locator(f"[data-testid=usage-days] tr[data-day='{today['day']}']")
    cells = row.locator("td.num").all_text_contents()
    assert cells == [str(today["calls"]), str(today["tokens_in"]), str(today["tokens_out"]),
                     "$0.0123"]  # fmt: skip
    assert page.locator("[data-testid=usage-total-cost]").text_content() == "$0.0123"
    keep_screenshot(page, "usage")
    a11y._assert_none(a11y._violations(page, "usage"))
