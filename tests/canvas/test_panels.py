"""The side panel's tabs after a real scripted run: Changes (with each diff), Files (highlighted,
confined) and Terminal, through the registry and the htmx endpoints."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from canvas.panels import PANELS, Panel, panel_list, panel_register
from tests.canvas.test_workspace_api import ran  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db(transaction=True)


def _panel(client: Client, conversation_id: str, name: str, **query) -> str:
    response = client.get(reverse("conversation-panel", args=[conversation_id, name]), query)
    assert response.status_code == 200, response.content[:300]
    return response.content.decode()


def test_the_page_shows_the_registered_tabs(browser, ran):  # noqa: F811
    page = browser.get(reverse("conversation-detail", args=[ran])).content.decode()
    assert 'id="side-panel"' in page
    names = [p.name for p in panel_list()]
    assert names[:3] == ["changes", "files", "terminal"]
    for name in names:
        assert f'id="tab-{name}"' in page
        assert reverse("conversation-panel", args=[ran, name]) in page


def test_changes_tab_lists_files_with_counts_and_loads_each_diff(browser, ran):  # noqa: F811
    html = _panel(browser, ran, "changes")
    assert "4 changed files" in html
    for path in ("edit.py", "notes.txt", "old.txt", "src/made.py"):
        assert f'data-path="{path}"' in html
    assert '<span class="count-add">+3</span>' in html  # notes.txt
    assert reverse("api:workspace_archive", args=[ran]) in html
    diff = browser.get(reverse("conversation-panel-diff", args=[ran]), {"path": "edit.py"})
    text = diff.content.decode()
    assert '<span class="pd-del">-y = 2</span><span class="pd-add">+y = 3</span>' in text
    same = browser.get(reverse("conversation-panel-diff", args=[ran]), {"path": "nope"})
    assert same.status_code == 200 and "has not changed" in same.content.decode()


def test_files_tab_browses_and_highlights_read_only(browser, ran):  # noqa: F811
    root = _panel(browser, ran, "files")
    assert "?path=src" in root and "?path=edit.py" in root
    view = _panel(browser, ran, "files", path="src/made.py")
    assert 'class="highlight"' in view and '<span class="nb">print</span>' in view
    assert "read-only" in view
    refused = _panel(browser, ran, "files", path="../proj")
    assert "may not contain" in refused


def test_terminal_tab_is_one_console(browser, ran):  # noqa: F811
    html = _panel(browser, ran, "terminal")
    assert html.count('class="console-command"') == 1
    assert "rm old.txt &amp;&amp; printf" in html


def test_other_teams_and_unknown_tabs_get_404(ran, other_user, browser):  # noqa: F811
    mallory = Client()
    mallory.force_login(other_user)
    for name in PANELS:
        assert mallory.get(reverse("conversation-panel", args=[ran, name])).status_code == 404
    diff = reverse("conversation-panel-diff", args=[ran])
    assert mallory.get(diff, {"path": "edit.py"}).status_code == 404
    assert browser.get(reverse("conversation-panel", args=[ran, "nope"])).status_code == 404


def test_a_later_tab_registers_and_renders(browser, ran, monkeypatch):  # noqa: F811
    monkeypatch.setattr("canvas.panels.PANELS", dict(PANELS))
    panel_register(
        Panel("plan", "Plan", "canvas/panels.html#panel-refusal", lambda c, r: {"refusal": "later"})
    )
    assert "later" in _panel(browser, ran, "plan")
    with pytest.raises(ValueError):
        panel_register(Panel("plan", "Plan", "x", lambda c, r: {}))
