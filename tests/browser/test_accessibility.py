"""Accessibility in a real browser: axe-core finds no serious or critical violation on the main
pages (login, the conversation list and its sidebar, a conversation after a scripted run with
each side-panel tab, the approvals page, every team settings page), on a 1280 px wide screen
and on a 390 px wide phone, where nothing may make the page wider than the screen either.

axe-core is the copy bundled by the PyPI package axe-playwright-python (installed from the
`test` extra), injected as a script tag. The site's CSP forbids inline scripts and eval, so this
test's browser context bypasses it; the other browser tests keep it. Uses the embedded server
and Chromium of test_live_run.
"""

from __future__ import annotations

import json
import re

import pytest
from axe_playwright_python.base import AXE_SCRIPT

from tests.browser import WAIT_MS
from tests.browser import test_live_run as live
from tests.browser.test_live_run import start_conversation, wait_for_status

pytestmark = pytest.mark.browser

server = live.server
browser = live.browser

BLOCKING = ("serious", "critical")
WIDE, PHONE = 1280, 390
TEAM_URL = re.compile(r"/teams/(\d+)/$")
SCRIPT = json.dumps(
    {
        "script": [
            {"tool": "file_editor",
             "args": {"command": "create", "path": "app.py", "file_text": "print('hi')\n"}},
            {"tool": "terminal", "args": {"command": "printf '\\033[1;31mred\\033[0m plain\\n'"}},
            {"tool": "terminal", "args": {"command": "sudo true", "security_risk": "LOW"}},
            {"tool": "finish", "args": {"message": "Done: **all steps** ran, see `app.py`."
                                        "\n\n- one\n- two\n\n```python\nprint('hi')  # ok\n```"}},
        ]
    }
)  # fmt: skip
"""Writes a file, prints colours, then holds `sudo true` for approval, and ends with a final answer
holding a highlighted code block: every kind of card."""


@pytest.fixture
def context(browser, server):
    context = browser.new_context(
        base_url=server, viewport={"width": WIDE, "height": 900}, bypass_csp=True
    )
    yield context
    context.close()


WIDER_THAN_SCREEN = """() => {
  const past = (el) => el.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5;
  return Array.from(document.querySelectorAll("body *"))
    .filter((el) => past(el) && !past(el.parentElement))
    .slice(0, 5).map((el) => `${Math.round(el.getBoundingClientRect().right)}px: ${el.outerHTML.slice(0, 120)}`);
}"""
"""The first few elements reaching past the screen's right edge inside a parent that does not,
for the failure message."""


def _set_width(page, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.wait_for_function("w => document.documentElement.clientWidth === w", arg=width)


def _violations(page, name: str) -> list[str]:
    """Run axe-core on what `page` shows now, wide and then on a phone; one readable line
    block per serious or critical violation (or, on the phone, a page wider than the screen),
    headed by `name`. Leaves the page wide."""
    found = _axe(page, name)
    _set_width(page, PHONE)
    try:
        width = page.evaluate("() => document.scrollingElement.scrollWidth")
        if width > PHONE:
            past = "\n".join(f"    {html}" for html in page.evaluate(WIDER_THAN_SCREEN))
            found.append(f"{name} at {PHONE}px: the page is {width}px wide\n{past}")
        found += _axe(page, f"{name} at {PHONE}px")
    finally:
        _set_width(page, WIDE)
    return found


def _axe(page, name: str) -> list[str]:
    """axe-core's serious and critical violations on what `page` shows now."""
    # Checked when no htmx request is in flight: a request dims its form's button meanwhile.
    page.wait_for_function("() => !document.querySelector('.htmx-request')")
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(content=AXE_SCRIPT)
    result = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
    found = []
    for violation in result["violations"]:
        if violation["impact"] not in BLOCKING:
            continue
        lines = [f"{name}: {violation['id']} ({violation['impact']}): {violation['help']}"]
        for node in violation["nodes"]:
            lines.append(f"    at {' '.join(node['target'])}: {node['html'][:160]}")
            summary = node.get("failureSummary", "").replace("\n", " / ")
            lines.append(f"       {summary[:300]}")
        found.append("\n".join(lines))
    return found


def _assert_none(found: list[str]) -> None:
    if found:
        pytest.fail("accessibility violations:\n" + "\n".join(found), pytrace=False)


def _log_in(page) -> None:
    page.goto("/login/")
    page.fill("#id_username", "demo")
    page.fill("#id_password", "demo-password")
    page.click("form button[type=submit]")
    page.wait_for_url(re.compile(r"/$"))


def _open_tab(page, tab: str) -> None:
    page.click(f"#tab-{tab}")
    page.wait_for_selector(f"#tab-{tab}[aria-selected=true]")
    page.wait_for_selector("#panel-body > *")


def test_login_list_conversation_and_approvals(context, server):
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    found: list[str] = []
    page.goto("/login/")
    found += _violations(page, "login")
    # A failed login shows its error next to the form.
    page.fill("#id_username", "demo")
    page.fill("#id_password", "wrong")
    page.click("form button[type=submit]")
    page.wait_for_selector(".form-errors")
    found += _violations(page, "login (refused)")

    _log_in(page)
    found += _violations(page, "conversation list (empty)")
    start_conversation(page, SCRIPT, "scripted")
    page.locator(".approval-card").wait_for(timeout=60_000)
    wait_for_status(page, "waiting_for_confirmation")
    found += _violations(page, "conversation (waiting for approval)")
    detail = page.url

    page.goto("/approvals/")
    page.wait_for_selector(".waiting-conversation")
    found += _violations(page, "approvals")

    page.goto(detail)
    page.locator(".approval-card button.approve").click()
    wait_for_status(page, "finished")
    for tab in ("changes", "files", "terminal"):
        _open_tab(page, tab)
        found += _violations(page, f"conversation (finished, {tab} tab)")

    page.goto("/")
    page.wait_for_selector("#conversation-rows tr")
    found += _violations(page, "conversation list")
    _assert_none(found)


TEAM_ROWS = (
    ("", "#member-add", {"#id_username": "nobody-here"}, "#invite-sent"),
    ("secrets/", "#secret-add",
     {"#id_name": "MODEL_KEY", "#id_value": "sk-a11y-secret-0123456789"}, "#secret-MODEL_KEY"),
    ("profiles/", "#profile-add",
     {"input[name=name]": "a11y-profile", "input[name=model]": "canvas/scripted",
      "select[name=api_key_secret]": "MODEL_KEY"}, "tr[data-profile=a11y-profile]"),
    ("agents/", "#agent-add",
     {"input[name=name]": "a11y-agent", "textarea[name=description]": "Checks accessibility.",
      "input[name=tools]": "think, finish"}, "tr[data-agent=a11y-agent]"),
    ("acp-agents/", "#acp-agent-add",
     {"input[name=name]": "a11y-acp", "input[name=command]": "my-acp",
      "textarea[name=secret_env]": "MY_KEY=MODEL_KEY"}, "tr[data-acp-agent=a11y-acp]"),
    ("mcp-servers/", "#mcp-server-add",
     {"input[name=name]": "a11y-mcp", "input[name=command]": "my-mcp-server",
      "textarea[name=secret_env]": "MY_KEY=MODEL_KEY"}, "tr[data-mcp-server=a11y-mcp]"),
    ("hooks/", "#hook-add",
     {"input[name=name]": "a11y-hook", "select[name=event]": "PreToolUse",
      "textarea[name=command]": "exit 0"}, "#hooks tbody tr >> text=a11y-hook"),
)  # fmt: skip
"""(page, form, fields, what appears): an invitation, a secret, a model profile, an agent
definition, an external agent, an MCP server and a hook, so each page lists a row and the
audit log has records."""


def _fill_team(page, team: str) -> None:
    for path, form, fields, shown in TEAM_ROWS:
        page.goto(team + path)
        for field, value in fields.items():
            target = page.locator(form).locator(field)
            if field.startswith("select"):
                target.select_option(value)
            else:
                target.fill(value)
        page.click(f"{form} button[type=submit]")
        page.wait_for_selector(shown)


def test_team_settings_pages(context, server):
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    _log_in(page)
    page.goto("/teams/")
    found = _violations(page, "teams")
    page.click("#team-rows a >> text=Demo")
    page.wait_for_url(TEAM_URL)
    team = TEAM_URL.search(page.url).group(0)
    _fill_team(page, team)
    for name, path in (
        ("members", ""),
        ("secrets", "secrets/"),
        ("policy", "policy/"),
        ("model profiles", "profiles/"),
        ("agents", "agents/"),
        ("external agents", "acp-agents/"),
        ("MCP servers", "mcp-servers/"),
        ("hooks", "hooks/"),
        ("audit log", "audit/"),
    ):
        page.goto(team + path)
        found += _violations(page, name)
    page.goto("/tokens/")
    found += _violations(page, "tokens")
    _assert_none(found)
