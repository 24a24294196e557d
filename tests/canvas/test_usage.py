"""The team's usage (canvas.usage): cost and tokens per UTC day, per model, member and
automation from the event log, sub-agents counted once and for their root's automation; the
Usage page with its SVG charts and budget line, its CSV, and GET /api/teams/{id}/usage with the
same numbers, for members only."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from automations.models import AutomationRun
from canvas.usage import team_usage, today_utc
from conversations import store
from conversations.events import AgentMessageEvent, SubagentsSettledEvent, Usage, UserMessageEvent
from teams.models import Policy
from tests.api import call, client_for
from tests.factories import make_conversation

pytestmark = pytest.mark.django_db


def _spend(conversation, cost: float, tokens_in: int = 100, tokens_out: int = 10) -> None:
    usage = Usage(prompt_tokens=tokens_in, completion_tokens=tokens_out, cost_usd=cost)
    store.append(conversation.pk, [AgentMessageEvent(text="done", usage=usage)])


@pytest.fixture
def spent(user, team, django_user_model, dispatched):
    """alice's two conversations on two models, bob's one started by an automation, whose
    sub-agent spent too (and whose settled round repeats that spend, not to be counted)."""
    from automations import services

    bob = django_user_model.objects.create_user("bob")
    first = make_conversation(owner=user, team=team, model="gpt-small")
    second = make_conversation(owner=user, team=team, model="claude")
    _spend(first, 0.25, 1000, 100)
    _spend(first, 0.5, 2000, 200)
    _spend(second, 0.125, 500, 50)
    store.append(second.pk, [UserMessageEvent(text="no usage here")])
    automation = services.automation_create(
        by=user, team=team, name="nightly", trigger="webhook", prompt_template="x",
        model="scripted",
    ).automation  # fmt: skip
    started = make_conversation(owner=bob, team=team, model="gpt-small")
    child = make_conversation(owner=bob, team=team, model="=sum(1)", parent=started)
    AutomationRun.objects.create(
        automation=automation, trigger="webhook", delivery_key="k1", status="started",
        conversation=started,
    )  # fmt: skip
    _spend(started, 1.0, 10, 1)
    _spend(child, 2.0, 20, 2)
    rollup = Usage(prompt_tokens=20, completion_tokens=2, cost_usd=2.0)
    store.append(started.pk, [SubagentsSettledEvent(tool_call_id="c1", results=[], usage=rollup)])
    return {"bob": bob, "automation": automation}


def test_usage_adds_up_per_day_model_member_and_automation(team, user, spent):
    with CaptureQueriesContext(connection) as queries:
        usage = team_usage(team.pk)
    assert len(queries) <= 8, [q["sql"][:80] for q in queries]
    assert len(usage.days) == 30 and usage.days[-1].day == today_utc()
    today = usage.days[-1].totals
    assert today.cost_usd == pytest.approx(3.875) and today.calls == 5
    assert (today.tokens_in, today.tokens_out) == (3530, 353)
    assert sum(d.totals.cost_usd for d in usage.days[:-1]) == 0
    assert {g.label: g.totals.cost_usd for g in usage.by_model} == pytest.approx(
        {"gpt-small": 1.75, "claude": 0.125, "=sum(1)": 2.0}
    )
    assert {g.label: g.totals.cost_usd for g in usage.by_member} == pytest.approx(
        {"alice": 0.875, "bob": 3.0}
    )
    # The sub-agent's spend is its root's automation's; alice's conversations no automation's.
    by_automation = {g.key: (g.label, g.totals.cost_usd) for g in usage.by_automation}
    assert by_automation == {
        str(spent["automation"].pk): ("nightly", pytest.approx(3.0)),
        None: ("(started by a person)", pytest.approx(0.875)),
    }
    assert usage.by_model[0].label == "=sum(1)"  # the costliest first


def test_days_are_utc_days_and_the_window_ends_where_asked(team, spent):
    later = team_usage(team.pk, days=7, today=today_utc() + timedelta(days=3))
    costs = [d.totals.cost_usd for d in later.days]
    assert costs[3] == pytest.approx(3.875) and sum(costs) == pytest.approx(3.875)
    gone = team_usage(team.pk, today=today_utc() + timedelta(days=30))
    assert gone.total.calls == 0 and gone.by_model == []
    with pytest.raises(ValueError, match="days must be between"):
        team_usage(team.pk, days=0)


def test_another_teams_spend_is_not_counted(team, spent, other_user):
    from teams.services import team_default_for

    theirs = make_conversation(owner=other_user, team=team_default_for(other_user))
    _spend(theirs, 9.0)
    assert team_usage(team.pk).total.cost_usd == pytest.approx(3.875)
    assert team_usage(theirs.team_id).total.cost_usd == pytest.approx(9.0)


def test_the_page_draws_todays_bar_and_the_budget_line(browser, team, spent):
    Policy.objects.update_or_create(team=team, defaults={"max_cost_per_month_usd": Decimal("62")})
    page = browser.get(reverse("team-usage", args=[team.pk])).content.decode()
    today = f"{today_utc():%Y-%m-%d}"
    assert 'role="img"' in page and 'aria-labelledby="usage-cost-chart-title' in page
    assert f'data-day="{today}"><title>{today}: $3.88</title>' in page
    assert 'data-testid="usage-cost-chart-budget"' in page and "Budget $" in page
    assert f'<tr data-day="{today}">' in page and "$3.8750" in page
    assert "Days are UTC" in page
    assert 'aria-current="page">Usage</a>' in page


def test_without_a_budget_there_is_no_line(browser, team, spent):
    page = browser.get(reverse("team-usage", args=[team.pk])).content.decode()
    assert "usage-cost-chart-budget" not in page and "has no monthly budget" in page


def test_the_csv_holds_the_same_numbers_escaped(browser, team, spent):
    response = browser.get(reverse("team-usage-csv", args=[team.pk]))
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    days = [r for r in rows if r["breakdown"] == "day"]
    assert len(days) == 30 and days[-1]["day"] == f"{today_utc():%Y-%m-%d}"
    assert Decimal(days[-1]["cost_usd"]) == Decimal("3.875")
    models = {r["label"] for r in rows if r["breakdown"] == "model"}
    assert models == {"gpt-small", "claude", "'=sum(1)"}  # never read as a formula
    assert {r["label"] for r in rows if r["breakdown"] == "member"} == {"alice", "bob"}


def test_the_api_gives_the_pages_numbers(api, team, spent):
    status, body = call(api, "get", f"/api/teams/{team.pk}/usage")
    assert status == 200, body
    assert body["days"][-1] == {
        "day": f"{today_utc():%Y-%m-%d}", "calls": 5, "tokens_in": 3530, "tokens_out": 353,
        "cost_usd": 3.875,
    }  # fmt: skip
    assert body["total"]["cost_usd"] == 3.875 and body["budget_month_usd"] is None
    assert {g["label"] for g in body["by_member"]} == {"alice", "bob"}
    status, week = call(api, "get", f"/api/teams/{team.pk}/usage?days=7")
    assert status == 200 and len(week["days"]) == 7
    status, bad = call(api, "get", f"/api/teams/{team.pk}/usage?days=0")
    assert (status, bad["error"], bad["detail"][0]["field"]) == (400, "invalid_input", "days")


def test_another_team_is_not_found_for_page_csv_and_api(team, spent, other_user, client):
    status, body = call(client_for(other_user), "get", f"/api/teams/{team.pk}/usage")
    assert (status, body["error"]) == (404, "not_found")
    client.force_login(other_user)
    assert client.get(reverse("team-usage", args=[team.pk])).status_code == 404
    assert client.get(reverse("team-usage-csv", args=[team.pk])).status_code == 404
    assert call(Client(), "get", f"/api/teams/{team.pk}/usage")[0] == 401
