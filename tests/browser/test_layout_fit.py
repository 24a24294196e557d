"""The smaller UI items in Chromium: no page wider than its viewport at 1280 and 390 px; on a
phone the page links and the settings tabs are one sideways-scrolling row each, and the
conversation comes before the list; sidebar rows with whole titles, a status word and an age;
the new-conversation form's parts for one choice only; compact tool rows that open; an
automation run's error read as a sentence.

Uses the embedded server and Chromium of test_live_run (the page logs in as demo)."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.browser import test_live_run as live
from tests.browser.test_live_run import manage, start_conversation, wait_for_status

pytestmark = pytest.mark.browser

server = live.server
browser = live.browser
page = live.page

WIDE, PHONE = {"width": 1280, "height": 800}, {"width": 390, "height": 844}
LONG_TITLE = "Summarise the quarterly billing export and list every account whose totals disagree"
ERROR = (
    "The conversation could not start: the team's monthly budget of $5.00 is spent; an admin "
    "can raise it on the Policy page."
)
TEAM_URL = re.compile(r"/teams/(\d+)/")


def _page_width(page) -> tuple[int, int]:
    return page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")


def _rows_of(page, selector: str) -> int:
    """How many lines the children of `selector` take (distinct offsetTop values)."""
    return page.eval_on_selector(
        selector, "el => new Set([...el.children].map(c => c.offsetTop)).size"
    )


def _run(page, script: list[dict], title: str = "") -> str:
    page.goto("/")
    start_conversation(page, json.dumps({"script": script}), "scripted")
    wait_for_status(page, "finished")
    if title:
        page.locator("#conversation-title h1, .conversation-title h1").first.wait_for()
    return page.url


def _failed_run(server: str) -> str:
    """An automation with one failed run whose error is a sentence; its runs page's path."""
    code = (
        "from automations.models import Automation, AutomationRun;"
        "from teams.models import Team;"
        "team = Team.objects.get(memberships__user__username='demo', name='Demo');"
        "a = Automation.objects.create(team=team, name='nightly', trigger='webhook', "
        "prompt_template='hi', model='demo');"
        f"AutomationRun.objects.create(automation=a, trigger='webhook', status='failed', "
        f"prompt='Check the nightly export and report what changed since yesterday', "
        f"error={ERROR!r});"
        "print(f'/teams/{team.pk}/automations/{a.pk}/runs')"
    )
    return manage(server, "shell", "-c", code).strip().splitlines()[-1]


def test_no_page_is_wider_than_its_viewport(page, server):
    detail = _run(page, [
        {"tool": "terminal", "args": {"command": "seq 1 40", "security_risk": "LOW"}},
        {"say": LONG_TITLE},
    ])  # fmt: skip
    team = TEAM_URL.search(page.locator("a", has_text="Team").first.get_attribute("href"))
    runs = _failed_run(server)
    pages = [
        "/", detail, "/approvals/", "/tokens/", f"/teams/{team.group(1)}/",
        f"/teams/{team.group(1)}/profiles/", runs, "/no-such-page/",
    ]  # fmt: skip
    for viewport in (WIDE, PHONE):
        page.set_viewport_size(viewport)
        for url in pages:
            page.goto(url)
            page.locator("main").wait_for()
            width, viewport_width = _page_width(page)
            assert width <= viewport_width, (url, viewport, width)

    # The runs table's Error column reads as a sentence, not a letter a line.
    page.set_viewport_size(WIDE)
    page.goto(runs)
    error = page.locator("#run-list .run-error")
    expect(error).to_have_text(ERROR)
    assert error.bounding_box()["width"] >= 14 * 15  # 14rem at the page's 15 px


def test_a_phone_gets_one_row_of_links_and_the_conversation_first(page):
    detail = _run(page, [{"say": "done"}])
    page.set_viewport_size(PHONE)
    page.goto("/")
    assert _rows_of(page, ".mainnav") == 1
    assert page.eval_on_selector(".mainnav", "el => el.scrollWidth >= el.clientWidth")
    form_top = page.locator("#new-conversation").bounding_box()["y"]
    assert form_top < page.locator(".sidebar").bounding_box()["y"]

    page.goto(detail)
    stream = page.locator(".layout-stream").bounding_box()["y"]
    assert stream < page.locator(".layout-sidebar").bounding_box()["y"]

    page.locator("a", has_text="Team").first.click()
    page.locator(".settings-tabs").wait_for()
    assert _rows_of(page, ".settings-tabs") == 1
    tabs = page.locator(".settings-tabs")
    assert tabs.evaluate("el => el.scrollWidth > el.clientWidth")  # the rest scrolls into view
    assert _page_width(page)[0] <= PHONE["width"]


def test_sidebar_rows_show_whole_titles_a_status_word_and_an_age(page):
    page.set_viewport_size(WIDE)
    page.goto("/")
    page.fill("#id_prompt", LONG_TITLE)  # the title is the prompt's start
    page.select_option("#id_model", "scripted")
    page.click("#new-conversation button[type=submit]")
    page.wait_for_url(live.DETAIL_URL)
    row = page.locator("#sidebar-rows .sidebar-row.current")
    link = row.locator("a")
    title = link.get_attribute("title")
    assert link.inner_text().strip() == title and len(title) > 40
    line = float(link.evaluate("el => parseFloat(getComputedStyle(el).lineHeight)"))
    assert link.bounding_box()["height"] > 1.5 * line  # it wraps instead of "Sc…"
    expect(row.locator(".status-word")).to_be_visible()
    expect(row.locator("time")).to_have_text(re.compile(r"just now|\d+ min ago"))


def test_the_form_shows_docker_and_model_id_fields_only_when_chosen(page):
    page.set_viewport_size(WIDE)
    page.goto("/")
    expect(page.locator("#id_image")).to_be_hidden()  # a local folder by default
    expect(page.locator("#id_model_other")).to_be_hidden()
    page.select_option("#id_model", "__other__")
    expect(page.locator("#id_model_other")).to_be_visible()
    page.select_option("#id_model", "demo")
    expect(page.locator("#id_model_other")).to_be_hidden()
    expect(page.locator("#id_confirmation_mode")).to_be_visible()
    expect(page.locator("#id_max_cost_usd")).to_be_visible()
    # The form is one closed box: nothing after it (the polled rows) inherits its htmx target.
    assert page.locator("#new-conversation #conversation-rows, .run-limits fieldset").count() == 0
    search = page.locator("#sidebar-q")
    assert search.evaluate("el => getComputedStyle(el).borderRadius") == "6px"


def test_a_long_output_is_folded_until_opened(page):
    _run(page, [{"tool": "terminal", "args": {"command": "seq 1 30", "security_risk": "LOW"}},
                {"say": "counted"}])  # fmt: skip
    box = page.locator(".output-box.is-long").first
    output = box.locator(".output")
    folded = output.evaluate("el => [el.clientHeight, el.scrollHeight]")
    assert folded[0] < folded[1] / 2, folded
    button = box.locator(".expand-output")
    expect(button).to_have_attribute("aria-expanded", "false")
    button.click()
    expect(button).to_have_text("Show less")
    opened = output.evaluate("el => [el.clientHeight, el.scrollHeight]")
    assert opened[0] > 3 * folded[0], (folded, opened)
