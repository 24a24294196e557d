"""The suite's lanes and the check that keeps them honest.

A test that starts something expensive carries its mark, so `make test-fast` can leave it out
(`-m "not (browser or docker or faults or acp)"`) and xdist can keep it with its group:

- `browser`: drives chromium through Playwright (the `browser` fixture of tests/browser/);
- `worker`: starts a real Celery worker process (`start_worker`, `WorkerProcess`, a fault
  stack's workers);
- `docker`: needs the Docker engine (tests/docker_images.py);
- `faults`: runs on the fault rig (tests/faults/: a private Redis and Postgres it may stop);
- `acp`: runs a real third-party ACP agent (tests/acp_bridge/real_agent.py, codex_agent.py).

Groups (`--dist loadgroup`): what is costly to start runs where it was started. A module with
module-scoped fixtures of its own (a browser's server, a Docker image, a real agent) is one
group, so its fixtures start once rather than on every xdist worker. Fault tests are not
grouped: the rig (a private Redis and Postgres cluster) is per session and takes seconds to
start, while the fault tests together take minutes, too long a pole for one worker.

Two checks: at collection, a test whose fixtures or module reach one of these without the mark
fails at setup with a message naming the missing mark; at run time, `require()` (called where
a worker starts or a Docker image is asked for) fails the current test the same way, which
catches what fixtures cannot show (a helper that starts a worker by hand).
"""

from __future__ import annotations

from types import ModuleType

import pytest

LANES = ("browser", "worker", "docker", "faults", "acp")
SLOW_LANES = ("browser", "docker", "faults", "acp")
"""What `make test-fast` leaves out: real Celery workers stay in, they are the product."""

_FIXTURE_MARKS = {
    ("tests.conftest", "start_worker"): "worker",
    ("tests.faults.conftest", "stack"): "faults",
    ("tests.faults.conftest", "fault_redis"): "faults",
    ("tests.faults.conftest", "fault_postgres"): "faults",
    ("tests.workspaces.test_docker", "engine"): "docker",
    ("tests.acp_bridge.codex_turns", "codex"): "acp",
}
"""(module defining the fixture, fixture name) -> the mark a test using it needs."""

_MODULE_MARKS = {
    "tests.docker_images": "docker",
    "tests.acp_bridge.real_agent": "acp",
    "tests.acp_bridge.codex_agent": "acp",
    "tests.acp_bridge.codex_turns": "acp",
    "tests.acp_bridge.docker_turns": "docker",
}
"""A test module holding a name from one of these modules needs the mark on all its tests."""

_MISSING = pytest.StashKey[list[str]]()
_current: pytest.Item | None = None


def required_marks(item: pytest.Item) -> set[str]:
    """The lanes `item` reaches through its fixtures, its folder or its module's imports."""
    needed: set[str] = set()
    info = getattr(item, "_fixtureinfo", None)
    for name, defs in info.name2fixturedefs.items() if info else ():
        module = getattr(defs[-1].func, "__module__", "")
        if (module, name) in _FIXTURE_MARKS:
            needed.add(_FIXTURE_MARKS[(module, name)])
        if name == "browser" and module.startswith("tests.browser."):
            needed.add("browser")
    module = getattr(item, "module", None)
    if module is not None:
        if module.__name__.startswith("tests.browser."):
            needed.add("browser")
        for value in vars(module).values():
            source = (
                value.__name__
                if isinstance(value, ModuleType)
                else getattr(value, "__module__", None)
            )
            if source in _MODULE_MARKS:
                needed.add(_MODULE_MARKS[source])
    return needed


def group_of(item: pytest.Item) -> str | None:
    """The xdist group `item` belongs to, if any (see the module docstring)."""
    info = getattr(item, "_fixtureinfo", None)
    defs = [d[-1] for d in info.name2fixturedefs.values()] if info else []
    if any(d.scope == "module" and d.func.__module__.startswith("tests.") for d in defs):
        return item.module.__name__ if getattr(item, "module", None) else None
    return None


def group_items(items: list[pytest.Item]) -> None:
    """Add `xdist_group` marks by `group_of` where a test has none of its own."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None and (name := group_of(item)):
            item.add_marker(pytest.mark.xdist_group(name))


def check_items(items: list[pytest.Item]) -> None:
    """Collection time: remember, on each item, the marks it needs and lacks."""
    for item in items:
        have = {mark.name for mark in item.iter_markers()}
        missing = sorted(required_marks(item) - have)
        if missing:
            item.stash[_MISSING] = missing


def fail_if_unmarked(item: pytest.Item) -> None:
    """Setup time: fail a test found unmarked at collection, before any fixture runs."""
    global _current
    _current = item
    missing = item.stash.get(_MISSING, [])
    if missing:
        marks = ", ".join(f"@pytest.mark.{name}" for name in missing)
        pytest.fail(f"{item.nodeid} starts what {marks} marks but lacks it", pytrace=False)


def forget(item: pytest.Item) -> None:
    global _current
    if _current is item:
        _current = None


def require(mark: str) -> None:
    """Fail the running test unless it carries `mark` (outside a test, e.g. bench: no-op)."""
    item = _current
    if item is not None and item.get_closest_marker(mark) is None:
        pytest.fail(f"{item.nodeid} starts what @pytest.mark.{mark} marks but lacks it")
