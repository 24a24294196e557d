"""The team's Runs page and the keyboard in a real browser.

Runs: opened before two conversations start, it shows both as they run without a reload, the
one that stops for an approval says so, is approved from its row, and its row turns Finished;
the page is no wider than the screen at 1280 and 390 px and axe finds no serious or critical
violation. Keyboard: j moves through a conversation's events to its approval card and a
approves it; on the inbox, j and r reject from the list; g i goes to the inbox; ? lists the keys.

Reuses test_live_run's embedded server (its own SQLite, the in-process worker) and Chromium,
and test_accessibility's axe and width checks (its context bypasses the CSP to inject axe; the
keyboard test keeps the CSP). CANVAS_SCREENSHOTS=1 also writes docs/screenshots/runs.png.
"""

from __future__ import annotations

import json
import re

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
page = live.page

CONVERSATION_ID = re.compile(r"/conversations/([0-9a-f-]{36})/")


def _script(*steps: dict, title: str) -> str:
    return json.dumps(
        {"title": title, "script": [*steps, {"tool": "finish", "args": {"message": "done"}}]}
    )


def _terminal(command: str, risk: str = "LOW") -> dict:
    return {"tool": "terminal", "args": {"command": command, "security_risk": risk}}


HELD = _script(_terminal("sleep 1"), _terminal("sudo true"), title="Held for approval")
"""Runs a moment, then holds `sudo true` for a person (the analyzer's sudo rule)."""
CHILD = json.dumps({"script": [_terminal("sleep 2"), {"say": "42"}]})
SLOW = _script(_terminal("sleep 1"), {"tool": "task", "args": {"prompt": CHILD}}, title="Slow")
"""Runs a moment, then waits for a sub-agent that runs a moment too."""


def _start(page, script: str) -> str:
    page.goto("/")
    start_conversation(page, script, "scripted")
    return CONVERSATION_ID.search(page.url).group(1)


def _row(runs, conversation_id: str):
    return runs.locator(f"#run-c-{conversation_id}")


def _page_width(page) -> int:
    return page.evaluate("() => document.scrollingElement.scrollWidth")


def test_runs_update_live_and_an_approval_is_decided_from_the_row(context, server):
    runs = context.new_page()
    runs.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    runs.on("pageerror", lambda exc: errors.append(str(exc)))
    a11y._log_in(runs)
    team = _demo_team(runs)
    _tab(runs, "Runs")
    runs.wait_for_selector("#runs-live[data-state=open]")
    runs.evaluate("window.__sameDocument = true")  # a reload would drop this

    other = context.new_page()
    other.set_default_timeout(WAIT_MS)
    held, slow = _start(other, HELD), _start(other, SLOW)

    # Both appear on the open page, live; the held one says what it waits for.
    _row(runs, slow).wait_for()
    held_row = _row(runs, held)
    held_row.locator(".badge >> text=Waiting for approval").wait_for()
    assert "Waiting for: Approval of 1 action" in held_row.inner_text()
    assert "person demo" in held_row.locator(".started-by").inner_text()
    pending = runs.locator(f"#run-approvals-c-{held} .pending-item")
    assert "sudo true" in pending.inner_text()
    child = runs.locator(f"#run-c-{slow} ~ tr.is-subagent").first
    child.wait_for()
    assert "parent" in child.locator(".started-by").inner_text()
    _row(runs, slow).locator(".badge >> text=Finished").wait_for()
    child.locator(".badge >> text=Finished").wait_for()

    # At 1280 the page fits; the screenshot is of this moment (one row waiting, one done).
    assert _page_width(runs) <= a11y.WIDE
    keep_screenshot(runs, "runs")
    found = a11y._violations(runs, "runs (waiting for approval)")

    pending.locator("button.approve").click()
    # The answer ("Approved by demo") replaces the buttons, unless the live row, with the run
    # going on, has already replaced the whole block: which comes first is a race, so the log
    # says who decided.
    held_row.locator(".badge >> text=Finished").wait_for()
    runs.locator(f"#run-approvals-c-{held}").wait_for(state="detached")
    assert runs.evaluate("window.__sameDocument") is True
    assert int(held_row.locator("td.num").nth(1).inner_text()) >= 2  # steps
    log = runs.request.get(f"/api/conversations/{held}/events")
    assert log.ok, log.text()
    decisions = [e for e in log.json()["events"] if e["type"] == "action.decision"]
    assert [(d["decision"], d["by"]) for d in decisions] == [("approved", "demo")]

    # The API lists the same runs for the team.
    team_id = int(re.search(r"/teams/(\d+)/", team).group(1))
    answer = runs.request.get(f"/api/teams/{team_id}/runs")
    assert answer.ok, answer.text()
    statuses = {r["conversation_id"]: r["status"] for r in answer.json()["runs"]}
    assert statuses[held] == statuses[slow] == "finished"

    # Filters: only finished runs started by demo, still live.
    runs.select_option("#runs-status", "finished")
    runs.select_option("#runs-person", "demo")
    runs.click("#runs-filters button[type=submit]")
    runs.wait_for_url(re.compile(r"status=finished"))
    _row(runs, held).wait_for()
    runs.wait_for_selector("#runs-live[data-state=open]")
    found += a11y._violations(runs, "runs (filtered)")
    assert _page_width(runs) <= a11y.WIDE
    a11y._assert_none(found)
    assert not errors, errors


def test_keyboard_moves_approves_rejects_and_lists_the_keys(page):
    conversation = _start(page, HELD)
    page.locator(".approval-card button.approve").wait_for()
    wait_for_status(page, "waiting_for_confirmation")

    # The composer has the focus: j there is text until Escape leaves the field. Then j from
    # the top: the first event shown, then on down to the approval card.
    page.keyboard.press("j")
    assert page.locator("#message-text").input_value() == "j"
    page.keyboard.press("Backspace")
    page.keyboard.press("Escape")
    page.evaluate("window.scrollTo(0, 0)")
    page.keyboard.press("j")
    first = page.evaluate("document.activeElement.id")
    assert first.startswith("event-"), first
    for _ in range(60):
        if page.evaluate("document.activeElement.classList.contains('approval-card')"):
            break
        page.keyboard.press("j")
    assert page.evaluate("document.activeElement.classList.contains('approval-card')")
    page.keyboard.press("k")
    assert page.evaluate("document.activeElement.classList.contains('event')")
    page.keyboard.press("j")
    page.keyboard.press("a")
    wait_for_status(page, "finished")
    assert (
        "by demo"
        in page.locator(".event-action-decision .decision-approved").locator("..").inner_text()
    )

    # ? lists the shortcuts; Escape closes the list.
    page.keyboard.press("?")
    dialog = page.locator("#shortcuts-dialog")
    dialog.wait_for()
    assert "Go to Needs approval" in dialog.inner_text()
    page.keyboard.press("Escape")
    dialog.wait_for(state="hidden")

    # Typing in the composer is left alone: "g i" there is text, not a shortcut.
    page.fill("#message-text", "")
    page.focus("#message-text")
    page.keyboard.type("gi")
    assert page.locator("#message-text").input_value() == "gi"
    assert CONVERSATION_ID.search(page.url).group(1) == conversation

    # On the inbox: g i goes there, j focuses a held action, r rejects it from the list.
    second = _start(page, HELD)
    page.locator(".approval-card button.approve").wait_for()
    page.locator("body").click()
    page.keyboard.press("g")
    page.keyboard.press("i")
    page.wait_for_url(re.compile(r"/approvals/$"))
    page.locator(".pending-item").first.wait_for()
    page.keyboard.press("j")
    assert page.evaluate("document.activeElement.classList.contains('pending-item')")
    page.keyboard.press("r")
    # The answer ("Rejected by demo") replaces the buttons unless the list's own refresh has
    # already dropped the decided item: a race, so the log says who decided.
    page.locator(".empty >> text=Nothing is waiting").wait_for()
    log = page.request.get(f"/api/conversations/{second}/events")
    assert log.ok, log.text()
    decisions = [e for e in log.json()["events"] if e["type"] == "action.decision"]
    assert [(d["decision"], d["by"]) for d in decisions] == [("rejected", "demo")]


def test_runs_goes_live_under_the_content_security_policy(page):
    refused: list[str] = []
    page.on("console", lambda m: "Content Security Policy" in m.text and refused.append(m.text))
    _demo_team(page)
    _tab(page, "Runs")
    page.wait_for_selector("#runs-live[data-state=open]")
    page.keyboard.press("?")
    page.locator("#shortcuts-dialog").wait_for()
    page.locator("#shortcuts-dialog button").click()
    page.locator("#shortcuts-dialog").wait_for(state="hidden")
    assert not refused, refused
