"""What each pytest-xdist worker keeps to itself, so `pytest -n N` shares nothing by accident.

pytest-django already gives every xdist worker its own test database (`test_<name>_gw<N>`).
The rest is set here, in the test process's settings and in the environment its subprocesses
(Celery workers, servers, CLI runs) inherit, before any test runs:

- the Redis database: REDIS_URL's number plus the worker's index (gw0 keeps it), so a broker
  fixture that flushes "its" database flushes no other worker's queues;
- the channel-layer prefix (CANVAS_CHANNEL_PREFIX): Redis pub/sub ignores the database
  number, and group names such as a user's access group repeat across test databases;
- the worker host name (CANVAS_WORKER_HOST): `test-host-gw<N>`.

Ports are always free ports (bind to 0) and temporary directories come from pytest's
per-worker `tmp_path`; a name that must be unique on the machine takes `suffix()`.
Outside xdist nothing changes (index 0, no suffix).
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

import pytest

REDIS_DATABASES = 16
"""Redis's default `databases`: the worker's number must stay below it."""


def worker_id() -> str:
    """`gw<N>` under xdist, "" otherwise."""
    return os.environ.get("PYTEST_XDIST_WORKER", "")


def worker_index() -> int:
    name = worker_id()
    return int(name[2:]) if name.startswith("gw") else 0


def suffix() -> str:
    """`_gw<N>` under xdist, "" otherwise: for names that must differ between workers."""
    return f"_{worker_id()}" if worker_id() else ""


def redis_url_for_worker(url: str, index: int) -> str:
    """`url` with its database number moved up by `index`; a clear error past Redis's last."""
    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    number = base + index
    if number >= REDIS_DATABASES:
        raise RuntimeError(
            f"xdist worker {index} would use Redis database {number} ({url} plus its index), "
            f"past the last ({REDIS_DATABASES - 1}): run fewer workers or start from a lower one"
        )
    return urlunsplit(parts._replace(path=f"/{number}"))


def isolate(settings) -> None:
    """Give this xdist worker its own Redis database, channel prefix and host name, in
    `settings` and in `os.environ` (for subprocesses). Call before any test runs."""
    name = worker_id()
    if not name:
        return
    if settings.REDIS_URL:
        url = redis_url_for_worker(settings.REDIS_URL, worker_index())
        prefix = f"asgi-{name}"
        os.environ["REDIS_URL"] = url
        os.environ["CANVAS_CHANNEL_PREFIX"] = prefix
        settings.REDIS_URL = url
        settings.CELERY_BROKER_URL = url
        settings.CHANNEL_LAYERS = {
            "default": {
                **settings.CHANNEL_LAYERS["default"],
                "CONFIG": {**settings.CHANNEL_LAYERS["default"]["CONFIG"], "hosts": [url],
                           "prefix": prefix},
            }
        }  # fmt: skip
        from canvas.celery import app

        app.conf.broker_url = url
    host = os.environ.get("CANVAS_WORKER_HOST", "")
    if host == "test-host":  # pyproject's default; a host set by hand is kept
        host = f"test-host-{name}"
        os.environ["CANVAS_WORKER_HOST"] = host
        settings.CANVAS_WORKER_HOST = host


def unique_ids(items: list) -> None:
    """Give items that share a node id one of their own: xdist schedules and reports tests by
    id, so of several items under one id only one would run. Schemathesis' per-operation
    items all carry their function's id (its renaming fails on this pytest), while their
    names hold the operation (`test_x[POST /api/conversations]`)."""
    seen: dict[str, int] = {}
    for item in items:
        seen[item.nodeid] = seen.get(item.nodeid, 0) + 1
    for item in items:
        if seen[item.nodeid] > 1 and item.name != item.nodeid.rsplit("::", 1)[-1]:
            item._nodeid = f"{item.nodeid.rsplit('::', 1)[0]}::{item.name}"


def check_ids(items: list, *, loadgroup: bool) -> None:
    """Fail the run, in words, where xdist would quietly run fewer tests or split a group:
    ids still shared after `unique_ids`, or (under `--dist loadgroup`) a grouped item whose
    id lacks the `@group` suffix xdist's scheduler reads, as happens with pytest 9.2
    (pytest-dev/pytest-xdist#1386)."""
    seen: set[str] = set()
    shared = sorted({item.nodeid for item in items if item.nodeid in seen or seen.add(item.nodeid)})
    if shared:
        raise pytest.UsageError(f"{len(shared)} test ids are shared by several items: {shared[:3]}")
    ungrouped = [
        item.nodeid
        for item in items
        if loadgroup and item.get_closest_marker("xdist_group") and "@" not in item.nodeid
    ]
    if ungrouped:
        raise pytest.UsageError(
            f"--dist loadgroup did not group {len(ungrouped)} tests ({ungrouped[0]}): this "
            "pytest and pytest-xdist do not work together (see pyproject.toml's pin)"
        )
