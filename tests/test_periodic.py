"""One list of periodic jobs for Celery beat and the embedded sweeper (canvas/periodic.py), and
the channel layer's prefix per deployment (common/channel_prefix.py)."""

from __future__ import annotations

import asyncio
import secrets
from urllib.parse import urlsplit, urlunsplit

import pytest

from canvas.celery import app
from canvas.embedded import EmbeddedWorker
from canvas.layers import RedisPubSubLayer
from canvas.periodic import JOBS, beat_schedule, jobs_enabled
from common.channel_prefix import channel_prefix, redis_database

CONTAINER_SWEEP = "orchestration.sweep_containers"


@pytest.fixture
def recorded(monkeypatch, settings) -> list[str]:
    """The registry's tasks, each replaced by one that records its call: the sweeps themselves
    have tests of their own, and a real container sweep here would remove the containers of
    other sessions sharing this machine's Docker engine."""
    app.loader.import_default_modules()  # the task modules, as a worker imports them at start
    calls: list[str] = []
    for job in JOBS:
        assert job.task in app.tasks, f"{job.name}: no task {job.task}"
        monkeypatch.setitem(app.tasks, job.task, lambda task=job.task: calls.append(task))
    settings.CANVAS_SWEEP_SECONDS = 5
    settings.CANVAS_SCHEDULE_SECONDS = 30
    settings.CANVAS_CONTAINER_SWEEP_SECONDS = 300
    return calls


class Rounds:
    """The sweeper's stop event: not set for `rounds` waits, then set; records each wait."""

    def __init__(self, rounds: int) -> None:
        self.answers = iter([False] * rounds + [True])
        self.waits: list[float] = []

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        return next(self.answers)


def sweeper(rounds: int = 1) -> EmbeddedWorker:
    worker = EmbeddedWorker.__new__(EmbeddedWorker)  # its sweeper alone, no Celery worker
    worker._stop = Rounds(rounds)
    return worker


def test_the_settings_schedule_is_the_registry_s():
    from django.conf import settings

    assert beat_schedule(settings) == settings.CELERY_BEAT_SCHEDULE
    assert set(settings.CELERY_BEAT_SCHEDULE) <= {job.name for job in JOBS}


@pytest.mark.parametrize("container_seconds", [300, 0])
def test_beat_and_the_embedded_sweeper_run_the_same_jobs(recorded, settings, container_seconds):
    settings.CANVAS_CONTAINER_SWEEP_SECONDS = container_seconds
    beat = beat_schedule(settings)
    worker = sweeper(rounds=1)
    worker._sweep()

    assert sorted(recorded) == sorted(entry["task"] for entry in beat.values())
    assert (CONTAINER_SWEEP in recorded) is (container_seconds > 0)  # 0: off in both
    assert worker._stop.waits == [5, 5]  # looked at as often as the shortest period
    for job, period in jobs_enabled(settings).items():
        assert beat[job.name]["schedule"] == period == beat[job.name]["options"]["expires"]


def test_the_embedded_sweeper_runs_the_container_sweep_at_its_period(recorded, settings):
    worker = sweeper()
    jobs = jobs_enabled(settings)
    due = dict.fromkeys(jobs, 0.0)
    assert CONTAINER_SWEEP in worker._sweep_due(jobs, due)  # the first round runs every job
    assert worker._sweep_due(jobs, due) == []  # none is due again at once

    by_task = {job.task: job for job in jobs}
    # 5 s later the sweeps at CANVAS_SWEEP_SECONDS are due; 300 s later the container sweep.
    due = {job: when - 5 for job, when in due.items()}
    assert worker._sweep_due(jobs, due) == [
        job.task for job, period in jobs.items() if period == settings.CANVAS_SWEEP_SECONDS
    ]
    due[by_task[CONTAINER_SWEEP]] -= 300
    assert worker._sweep_due(jobs, due) == [CONTAINER_SWEEP]
    assert recorded.count(CONTAINER_SWEEP) == 2


def test_a_period_must_be_zero_or_more(settings):
    settings.CANVAS_CONTAINER_SWEEP_SECONDS = -1
    with pytest.raises(ValueError, match="CANVAS_CONTAINER_SWEEP_SECONDS must be 0 .off."):
        beat_schedule(settings)


# The channel layer's prefix.


def test_the_prefix_default_follows_the_redis_database():
    first, second = "redis://cache:6379/0", "redis://cache:6379/3"
    assert channel_prefix(first) == "asgi"  # what every deployment had before
    assert channel_prefix(second) == "asgi-db3"
    assert channel_prefix("redis://cache:6379") == "asgi"
    assert channel_prefix("rediss://:pw@cache:6380/12") == "asgi-db12"
    assert channel_prefix("redis://cache/?db=2") == "asgi-db2"  # redis-py reads ?db= too
    assert channel_prefix("unix:///run/redis.sock?db=5") == "asgi-db5"
    assert redis_database("unix:///run/redis.sock") == 0
    assert channel_prefix(second, "team-blue") == "team-blue"  # the setting wins


def test_a_bad_prefix_or_database_is_a_clear_error():
    with pytest.raises(ValueError, match="CANVAS_CHANNEL_PREFIX 'a b'"):
        channel_prefix("redis://cache/0", "a b")
    with pytest.raises(ValueError, match="REDIS_URL selects database 'x'"):
        channel_prefix("redis://cache/x")


def test_the_settings_use_the_prefix_of_this_redis(settings):
    import os

    prefix = settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"]
    assert prefix == channel_prefix(settings.REDIS_URL, os.environ.get("CANVAS_CHANNEL_PREFIX"))


def with_database(url: str, number: int) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{number}", query=""))


async def test_two_deployments_on_one_redis_hear_only_their_own_groups(settings):
    """Redis pub/sub ignores the database: only the prefixes keep the groups apart."""
    layers = [
        RedisPubSubLayer(hosts=[url], prefix=channel_prefix(url))
        for url in (with_database(settings.REDIS_URL, 1), with_database(settings.REDIS_URL, 2))
    ]
    group = f"access.user.{secrets.randbelow(10**9)}"  # the same person id in both
    try:
        channels = [await layer.new_channel() for layer in layers]
        for layer, channel in zip(layers, channels, strict=True):
            await layer.group_add(group, channel)
        for index, layer in enumerate(layers):
            await layer.group_send(group, {"type": "hint", "deployment": index})
        # Each hears its own first: the other's, sent before, would have come first.
        for index, (layer, channel) in enumerate(zip(layers, channels, strict=True)):
            message = await asyncio.wait_for(layer.receive(channel), 5)
            assert message["deployment"] == index
    finally:
        for layer in layers:
            await layer.flush()
