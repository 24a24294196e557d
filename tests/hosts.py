"""Judging worker hosts in this process: a database that has been there for a while, and
pings answered (or not) without asking a broker."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from orchestration.models import SweepMark


def database_steady_for(seconds: float) -> None:
    """As if sweeps had reached the database without a gap for `seconds`, the last just now."""
    now = timezone.now()
    SweepMark.objects.update_or_create(
        pk=1, defaults={"swept_at": now, "steady_since": now - timedelta(seconds=seconds)}
    )


def pings_answered_by(monkeypatch, *hosts: str) -> list[set[str]]:
    """Workers of `hosts` (only) answer the sweeper's ping; returns the hosts it asked about,
    one set per ping."""
    import orchestration.chain.stranded

    asked: list[set[str]] = []

    def answering(silent: set[str], timeout: float = 1.0) -> set[str]:
        asked.append(set(silent))
        return silent & set(hosts)

    monkeypatch.setattr(orchestration.chain.stranded, "hosts_answering", answering)
    return asked
