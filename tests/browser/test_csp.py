"""The Content-Security-Policy in a real browser: every page works under it without a violation.

Violations are caught two ways, from before the login page loads: Chromium's console message
("Refused to ...", "... violates the following Content Security Policy directive ...") and the
`securitypolicyviolation` event, forwarded to the console by an init script (init scripts run
outside the page's policy). Uses the embedded server and Chromium of test_live_run.
"""

from __future__ import annotations

import re

import pytest

from tests.browser import WAIT_MS
from tests.browser import test_live_run as live
from tests.browser.test_live_run import start_conversation, wait_for_status

pytestmark = pytest.mark.browser

server = live.server
browser = live.browser

REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (e) => {
  console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI} `
    + `at ${e.sourceFile}:${e.lineNumber} on ${document.location.pathname}`);
});
"""
VIOLATION = re.compile(r"Content Security Policy|CSP violation|Refused to", re.I)
TEAM_URL = re.compile(r"/teams/(\d+)/$")


@pytest.fixture
def csp_page(browser, server):
    context = browser.new_context(base_url=server, viewport={"width": 1200, "height": 900})
    context.add_init_script(REPORT_VIOLATIONS)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    violations: list[str] = []
    errors: list[str] = []
    page.on("console", lambda m: VIOLATION.search(m.text) and violations.append(m.text))
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.violations = violations
    yield page
    context.close()
    assert not violations, violations
    assert not errors, errors


def visit(page, url: str) -> None:
    response = page.goto(url)
    assert response.status == 200, url
    assert "script-src 'self'" in response.headers["content-security-policy"], url


def test_every_page_works_under_the_policy(csp_page, server):
    page = csp_page
    visit(page, "/login/")
    page.fill("#id_username", "demo")
    page.fill("#id_password", "demo-password")
    page.click("form button[type=submit]")
    page.wait_for_url(f"{server}/")

    # The conversation page: htmx, its ws extension and the page scripts, events over the socket
    # (connect-src 'self' must cover ws:// of the same host).
    start_conversation(page, "Write FizzBuzz and run it.", "demo")
    wait_for_status(page, "finished")
    assert page.locator("#live-indicator").inner_text() == "live"
    assert page.locator(".event-tool-result").count() >= 1
    page.fill("#message-text", "One more thing?")
    page.click("#message-form button[type=submit]")
    page.wait_for_selector(".event-message-user >> text=One more thing?")
    wait_for_status(page, "finished")

    visit(page, "/approvals/")
    page.wait_for_selector("#approval-rows")

    # Team pages; creating a team exercises an htmx form and a redirect (form-action 'self').
    visit(page, "/teams/")
    page.fill("#id_name", "CSP team")
    page.click("#team-create button[type=submit]")
    page.wait_for_url(TEAM_URL)
    team_id = TEAM_URL.search(page.url).group(1)
    visit(page, f"/teams/{team_id}/hooks/")
    visit(page, f"/teams/{team_id}/audit/")
    page.select_option("#team-switcher", label="CSP team")  # htmx on change, no inline code
    page.wait_for_load_state("networkidle")

    # The copy button is a script file's listener now, not an inline handler.
    visit(page, "/tokens/")
    page.fill("#id_name", "csp test")
    page.click("#token-create button[type=submit]")
    page.wait_for_selector(".new-token")
    page.click(".new-token button[data-copy-from]")
    page.wait_for_selector(".new-token button >> text=Copied")

    # The API docs: Swagger UI from local static files.
    visit(page, "/api/docs")
    page.wait_for_selector("#swagger-ui .opblock", timeout=WAIT_MS)
