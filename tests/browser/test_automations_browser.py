"""Automations in a real browser: an admin creates a webhook automation on the team's
Automations page and copies its URL and secret (shown once), a signed GitHub-style delivery
reaches the live server's /hooks/{id}, its run appears in the automation's history, and its
conversation link opens the conversation the delivery started.

Reuses test_live_run's embedded server (its own SQLite, the in-process worker), chromium and
the logged-in page (demo, owner of the Demo team).
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from automations.signatures import sign_github
from tests.browser import WAIT_MS
from tests.browser import test_accessibility as a11y
from tests.browser import test_live_run as live
from tests.browser.test_live_run import DETAIL_URL
from tests.browser.test_team_settings import _demo_team, _tab

pytestmark = pytest.mark.browser

server = live.server
browser = live.browser
page = live.page

NAME = "browser-pr-review"
TEMPLATE = "Say hello to {{ payload.sender.login }} about {{ payload.repository.full_name }}."
PAYLOAD = {"action": "opened", "sender": {"login": "octocat"},
           "repository": {"full_name": "acme/web"}}  # fmt: skip
PROMPT = "Say hello to octocat about acme/web."
LIST_SCREENSHOT = Path("/tmp/ui-automations.png")
RUNS_SCREENSHOT = Path("/tmp/ui-automation-runs.png")


def _deliver(url: str, secret: str, payload: dict, delivery: str) -> tuple[int, dict]:
    """POST a GitHub-style signed delivery, as GitHub would: no session, no CSRF token."""
    body = json.dumps(payload).encode()
    request = urllib.request.Request(
        url, data=body, method="POST",
        headers={"Content-Type": "application/json", "X-GitHub-Event": "pull_request",
                 "X-GitHub-Delivery": delivery, "X-Hub-Signature-256": sign_github(secret, body)},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.status, json.loads(answer.read())


def test_a_webhook_delivery_shows_in_the_history_and_opens_its_conversation(page, server):
    _demo_team(page)
    _tab(page, "Automations")
    form = page.locator("#automation-add")
    form.locator("input[name=name]").fill(NAME)
    form.locator("select[name=trigger]").select_option("webhook")
    form.locator("textarea[name=prompt_template]").fill(TEMPLATE)
    form.locator("select[name=model]").select_option("demo")
    form.locator("button[type=submit]").click()

    # The URL and the secret, shown in this answer only.
    page.wait_for_selector("#new-webhook-secret")
    url = page.input_value("#new-webhook-url")
    secret = page.input_value("#new-secret-value")
    assert url.startswith(f"{server}/hooks/") and len(secret) >= 32
    row = page.locator(f"tr[data-automation={NAME}]")
    assert "webhook" in row.inner_text() and "none yet" in row.inner_text()
    page.screenshot(path=str(LIST_SCREENSHOT), full_page=True)
    page.reload()
    assert secret not in page.content()

    status, answer = _deliver(url, secret, PAYLOAD, delivery="browser-1")
    assert status == 202 and answer["conversation_id"], answer

    # The run is in the automation's history, with its rendered prompt and conversation.
    page.locator(f"tr[data-automation={NAME}] a >> text={NAME}").click()
    run_row = page.locator(f"#run-{answer['run_id']}")
    run_row.wait_for()
    assert "webhook" in run_row.inner_text() and PROMPT in run_row.inner_text()
    assert "sha256:" in run_row.inner_text()  # keyed by the body's MAC, not the delivery id
    page.screenshot(path=str(RUNS_SCREENSHOT), full_page=True)

    # The filter: none failed, so the row goes; all statuses bring it back.
    page.select_option("#id_status", "failed")
    run_row.wait_for(state="detached")
    assert "No failed runs." in page.locator("#run-list").inner_text()
    page.select_option("#id_status", "")
    run_row.wait_for()

    run_row.locator("a.run-conversation").click()
    page.wait_for_url(DETAIL_URL)
    assert answer["conversation_id"] in page.url
    # The model's prompt: the payload's values quoted as untrusted, the team's words plain.
    message = page.locator(".event-message-user").first.inner_text()
    assert "Say hello to <untrusted_payload>octocat</untrusted_payload> about" in message


def test_the_automation_pages_have_no_serious_accessibility_violations(browser, server):
    """axe-core on the list (with the secret shown once) and on a history with a run, wide and
    on a phone, as tests/browser/test_accessibility.py checks the other settings pages."""
    context = browser.new_context(
        base_url=server, viewport={"width": a11y.WIDE, "height": 900}, bypass_csp=True
    )
    try:
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        a11y._log_in(page)
        _demo_team(page)
        _tab(page, "Automations")
        form = page.locator("#automation-add")
        form.locator("input[name=name]").fill("a11y-nightly")
        form.locator("select[name=trigger]").select_option("schedule")
        form.locator("input[name=cron]").fill("0 3 * * 1-5")
        form.locator("textarea[name=prompt_template]").fill("Nightly check.")
        form.locator("button[type=submit]").click()
        page.wait_for_selector("#new-webhook-secret")
        found = a11y._violations(page, "automations")

        page.locator("tr[data-automation=a11y-nightly] a >> text=a11y-nightly").click()
        page.wait_for_selector("#run-now")
        page.fill("#id_payload", '{"reason": "a11y"}')
        page.click("#run-now button[type=submit]")
        page.wait_for_selector("#run-outcome")
        found += a11y._violations(page, "automation runs")
        a11y._assert_none(found)
    finally:
        context.close()
