"""Monthly team spend: increments, months, and concurrent writers."""

from __future__ import annotations

import threading
from datetime import date
from decimal import Decimal

import pytest
from django.db import connection

from teams import budget
from teams.models import Team, TeamSpend


@pytest.fixture
def team(db) -> Team:
    return Team.objects.create(name="spenders")


def test_nothing_spent_is_zero(team):
    assert budget.spend_this_month(team.pk) == Decimal(0)


def test_spend_adds_up_within_the_month_and_ignores_zero(team):
    budget.spend_add(team.pk, 0.25)
    budget.spend_add(team.pk, Decimal("0.000123"))
    budget.spend_add(team.pk, 0)
    assert budget.spend_this_month(team.pk) == Decimal("0.250123")
    assert TeamSpend.objects.count() == 1


def test_a_new_month_starts_from_zero(team, monkeypatch):
    monkeypatch.setattr(budget, "current_month", lambda: date(2030, 1, 1))
    budget.spend_add(team.pk, 5)
    monkeypatch.setattr(budget, "current_month", lambda: date(2030, 2, 1))
    assert budget.spend_this_month(team.pk) == 0
    budget.spend_add(team.pk, 1)
    assert budget.spend_this_month(team.pk) == 1
    assert sorted(TeamSpend.objects.values_list("month", "cost_usd")) == [
        (date(2030, 1, 1), Decimal(5)),
        (date(2030, 2, 1), Decimal(1)),
    ]


def test_the_month_is_the_first_day_of_the_current_utc_month():
    month = budget.current_month()
    assert month.day == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_never_lose_an_increment():
    team = Team.objects.create(name="busy")
    threads_count, each = 8, 25
    barrier = threading.Barrier(threads_count)
    errors: list[BaseException] = []

    def spend() -> None:
        try:
            barrier.wait()  # all first inserts race for the month's row
            for _ in range(each):
                budget.spend_add(team.pk, Decimal("0.01"))
        except BaseException as exc:  # surfaced below: a thread's failure must fail the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=spend) for _ in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert budget.spend_this_month(team.pk) == Decimal("0.01") * threads_count * each
    assert TeamSpend.objects.filter(team=team).count() == 1
