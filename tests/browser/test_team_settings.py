"""Team settings in a real browser: every page's round trip as an admin (create, see it listed,
change, delete), and a plain member who sees no admin controls and whose posts are refused.

Reuses the embedded server, chromium and the logged-in page (demo, owner of the Demo team) of
test_live_run; the member is a second login made on that server's own database.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser import WAIT_MS
from tests.browser import test_live_run as live

pytestmark = pytest.mark.browser

server = live.server
browser = live.browser
page = live.page

TEAM_URL = re.compile(r"/teams/(\d+)/$")
SECRET = "sk-browser-secret-0123456789"
NEW_SECRET = "sk-browser-rotated-9876543210"
MEMBER, MEMBER_PASSWORD = "mia", "mia-password-12345"


def _demo_team(page) -> str:
    """The Demo team's settings URL prefix, e.g. "/teams/1/"."""
    page.goto("/teams/")
    page.click("#team-rows a >> text=Demo")
    page.wait_for_url(TEAM_URL)
    return TEAM_URL.search(page.url).group(0)


def _tab(page, name: str) -> None:
    page.click(f".settings-tabs >> text={name}")
    page.wait_for_selector(f".settings-tabs a[aria-current=page] >> text={name}")


def _accept_confirm(page) -> None:
    page.once("dialog", lambda dialog: dialog.accept())


def _add_secret(page, name: str, value: str, description: str = ""):
    _tab(page, "Secrets")
    page.fill("#id_name", name)
    page.fill("#id_value", value)
    page.fill("#id_description", description)
    page.click("#secret-add button[type=submit]")
    return page.wait_for_selector(f"#secret-{name}")


def test_secrets_round_trip(page):
    _demo_team(page)
    row = _add_secret(page, "BROWSER_KEY", SECRET, "made in the browser")
    assert "made in the browser" in row.inner_text()
    assert SECRET not in page.content()
    assert page.input_value("#id_value") == ""

    page.click("#secret-BROWSER_KEY-edit summary")
    page.fill("#secret-BROWSER_KEY-edit input[name=value]", NEW_SECRET)
    page.fill("#secret-BROWSER_KEY-edit input[name=description]", "rotated in the browser")
    page.click("#secret-BROWSER_KEY-edit button[type=submit]")
    page.wait_for_selector("#secret-BROWSER_KEY >> text=rotated in the browser")
    page.reload()
    assert SECRET not in page.content() and NEW_SECRET not in page.content()

    _accept_confirm(page)
    page.click("#secret-BROWSER_KEY button >> text=Delete")
    page.wait_for_selector("#secret-BROWSER_KEY", state="detached")

    page.goto(page.url.replace("secrets/", "audit/"))
    kinds = page.locator("table").inner_text()
    for kind in ("secret.created", "secret.updated", "secret.deleted"):
        assert kind in kinds


def _save_policy(page, *, mode: str, **limits: str) -> None:
    """Fill the policy form (the limits not named are emptied) and save it."""
    for field in ("max_iterations_per_run", "max_cost_per_run_usd", "allowed_tools"):
        page.fill(f"#id_{field}", limits.get(field, ""))
    page.select_option("#id_confirmation_mode", mode)
    page.click("#policy-form button[type=submit]")
    page.wait_for_selector("#policy >> text=Policy saved")


def test_policy_round_trip(page):
    _demo_team(page)
    _tab(page, "Policy")
    assert "no limit" in page.locator("#policy-max_cost_per_run_usd").inner_text()

    _save_policy(page, max_cost_per_run_usd="3.5", allowed_tools="terminal, think", mode="always")
    assert page.locator("#policy-max_cost_per_run_usd strong").inner_text() == "$3.5"
    assert page.locator("#policy-allowed_tools strong").inner_text() == "terminal, think"
    assert page.locator("#policy-confirmation_mode strong").inner_text() == "Always confirm"

    # A limit the service refuses comes back in its words, nothing saved.
    page.fill("#id_max_iterations_per_run", "0")
    page.click("#policy-form button[type=submit]")
    notice = page.wait_for_selector("#policy .form-errors")
    assert "max_iterations_per_run must be a whole number from 1 to 10000" in notice.inner_text()

    # Back to no limits of the team's own.
    _save_policy(page, mode="risky")
    assert page.locator("#policy-max_cost_per_run_usd strong").inner_text() == "no limit"
    assert page.locator("#policy-allowed_tools strong").inner_text() == "all"


def test_model_profile_round_trip_and_test_connection(page):
    _demo_team(page)
    _add_secret(page, "MODEL_KEY", SECRET)

    _tab(page, "Model profiles")
    page.fill("#profile-add input[name=name]", "scripted-check")
    page.fill("#profile-add input[name=model]", "canvas/scripted")
    page.select_option("#profile-add select[name=api_key_secret]", "MODEL_KEY")
    page.click("#profile-add button[type=submit]")
    row = page.locator("tr[data-profile=scripted-check]")
    row.wait_for()
    assert "canvas/scripted" in row.inner_text() and "MODEL_KEY" in row.inner_text()

    # One tiny call on the in-process worker; the page polls until its answer arrives.
    row.locator("button >> text=Test connection").click()
    verdict = page.wait_for_selector("tr[data-profile=scripted-check] .profile-check.ok")
    assert "Connected" in verdict.inner_text() and "scripted test model" in verdict.inner_text()
    assert SECRET not in page.content()

    edit = page.locator("tr[id$=-edit]", has_text="Edit scripted-check")
    edit.locator("summary").click()
    edit.locator("input[name=temperature]").fill("0.3")
    edit.locator("button[type=submit]").click()
    # The temperature's own cell: "0.3" may also be the check's "Connected in 0.3 s".
    expect(row.locator("td").nth(5)).to_have_text("0.3")

    # The service's refusal, in its words.
    page.fill("#profile-add input[name=name]", "scripted-check")
    page.fill("#profile-add input[name=model]", "canvas/scripted")
    page.click("#profile-add button[type=submit]")
    notice = page.wait_for_selector("#profiles .form-errors")
    assert "already exists" in notice.inner_text()

    _accept_confirm(page)
    page.locator("tr[data-profile=scripted-check] button >> text=Delete").click()
    page.wait_for_selector("tr[data-profile=scripted-check]", state="detached")


def test_agent_definition_round_trip(page):
    _demo_team(page)
    _tab(page, "Agents")
    page.wait_for_selector("tr[data-agent=general]")
    page.fill("#agent-add input[name=name]", "reviewer")
    page.fill("#agent-add textarea[name=description]", "Reviews a diff and reports problems.")
    page.fill("#agent-add input[name=tools]", "terminal, think")
    page.click("#agent-add button[type=submit]")
    row = page.locator("tr[data-agent=reviewer]")
    row.wait_for()
    assert "terminal, think" in row.inner_text() and "the parent's" in row.inner_text()

    edit = page.locator("tr[id$=-edit]", has_text="Edit reviewer")
    edit.locator("summary").click()
    edit.locator("input[name=max_iterations]").fill("12")
    edit.locator("button[type=submit]").click()
    expect(row.locator("td").nth(4)).to_have_text("12")

    # The service's refusal, in its words.
    page.fill("#agent-add input[name=name]", "general")
    page.fill("#agent-add textarea[name=description]", "Mine.")
    page.click("#agent-add button[type=submit]")
    notice = page.wait_for_selector("#agents .form-errors")
    assert "is a built-in agent" in notice.inner_text()

    _accept_confirm(page)
    page.locator("tr[data-agent=reviewer] button >> text=Delete").click()
    page.wait_for_selector("tr[data-agent=reviewer]", state="detached")


def test_hooks_and_notifications_round_trip(page):
    _demo_team(page)
    _tab(page, "Hooks & notifications")
    page.fill("#hook-add input[name=name]", "browser-hook")
    page.select_option("#hook-add select[name=event]", "PreToolUse")
    page.fill("#hook-add textarea[name=command]", "exit 0")
    page.click("#hook-add button[type=submit]")
    row = page.locator("#hooks tbody tr", has_text="browser-hook").first
    row.wait_for()

    row.locator("button >> text=Disable").click()
    page.wait_for_selector("#hooks tr.is-revoked >> text=browser-hook")
    edit = page.locator("#hooks tr[id$=-edit]", has_text="Edit browser-hook")
    edit.locator("summary").click()
    edit.locator("input[name=position]").fill("7")
    edit.locator("input[name=timeout_seconds]").fill("20")
    edit.locator("button[type=submit]").click()
    page.wait_for_selector("#hooks tbody tr >> text=20 s")
    assert (
        page.locator("#hooks tbody tr", has_text="browser-hook")
        .first.locator("td")
        .first.inner_text()
        == "7"
    )

    _accept_confirm(page)
    page.locator("#hooks tbody tr", has_text="browser-hook").first.locator(
        "button >> text=Delete"
    ).click()
    page.wait_for_selector("#hooks >> text=No hooks yet")

    page.fill("#notification-set input[name=url]", "https://hooks.example.invalid/canvas")
    page.click("#notification-set button[type=submit]")
    secret = page.wait_for_selector("#new-secret-value")
    assert secret.input_value()
    page.reload()
    assert page.locator("#new-secret-value").count() == 0
    _accept_confirm(page)
    page.click("#notifications button >> text=Remove webhook")
    page.wait_for_selector("#notifications >> text=No webhook")


def _csrf_post(page, url: str, data: dict[str, str]) -> int:
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.request.post(
        url, form=data, headers={"X-CSRFToken": token, "HX-Request": "true"}
    )
    return response.status


def test_members_and_a_plain_member_sees_no_admin_controls(page, browser, server):
    live.manage(
        server, "ensure_demo_user", CANVAS_DEMO_USER=MEMBER,
        CANVAS_DEMO_PASSWORD=MEMBER_PASSWORD, CANVAS_DEMO_TEAM="Mia's team",
    )  # fmt: skip
    prefix = _demo_team(page)

    # Invitations: create (its link shown once), list, revoke.
    for name in ("nobody-here", MEMBER):
        page.fill("#id_username", name)
        page.click("#member-add button[type=submit]")
        page.wait_for_selector(f"#invite-sent >> text={name} is invited")
    assert page.input_value("#invite-link").endswith("/teams/")
    assert page.locator("#invitations tbody tr").count() == 2
    page.locator("#invitations tr", has_text="nobody-here").locator("button").click()
    page.wait_for_selector("#invitations tr >> text=nobody-here", state="detached")

    context = browser.new_context(base_url=server, viewport={"width": 1200, "height": 900})
    mia = context.new_page()
    mia.set_default_timeout(WAIT_MS)
    mia.goto("/login/")
    mia.fill("#id_username", MEMBER)
    mia.fill("#id_password", MEMBER_PASSWORD)
    mia.click("form button[type=submit]")
    mia.wait_for_url(f"{server}/")
    mia.goto("/teams/")
    mia.locator("#my-invitations tr", has_text="Demo").locator("button >> text=Accept").click()
    mia.wait_for_url(TEAM_URL)

    # The member reads the settings but sees no control that writes.
    assert mia.locator("#member-add").count() == 0
    assert mia.locator(".settings-tabs >> text=Hooks").count() == 0
    _tab(mia, "Secrets")
    assert mia.locator("#secret-add").count() == 0 and mia.locator("#secrets button").count() == 0
    _tab(mia, "Policy")
    assert mia.locator("#policy-max_cost_per_run_usd").count() == 1
    assert mia.locator("#policy-form").count() == 0
    _tab(mia, "Model profiles")
    assert mia.locator("#profile-add").count() == 0 and mia.locator("#profiles button").count() == 0
    _tab(mia, "Agents")
    assert mia.locator("#agent-add").count() == 0 and mia.locator("#agents button").count() == 0
    assert mia.goto(f"{prefix}hooks/").status == 403

    # And a hand-made post is refused.
    for path, data in (
        ("secrets/new", {"name": "MIA_KEY", "value": "x"}),
        ("policy/set", {"confirmation_mode": "never", "risk_threshold": "HIGH", "network": "none"}),
        ("profiles/new", {"name": "mine", "model": "canvas/scripted"}),
        ("agents/new", {"name": "mine", "description": "Mine."}),
        (
            "hooks/add",
            {"name": "mine", "event": "Stop", "command": "exit 0", "timeout_seconds": "5"},
        ),
        ("invitations/new", {"username": "someone", "role": "member"}),
    ):
        assert _csrf_post(mia, f"{server}{prefix}{path}", data) == 403, path
    context.close()

    # Roles and removal, as the owner.
    page.reload()
    page.select_option(f"#member-{MEMBER} select[name=role]", "viewer")
    page.wait_for_selector(
        f"#member-{MEMBER} select[name=role] >> option[value=viewer][selected]", state="attached"
    )
    _accept_confirm(page)
    page.locator(f"#member-{MEMBER} button >> text=Remove").click()
    page.wait_for_selector(f"#member-{MEMBER}", state="detached")
