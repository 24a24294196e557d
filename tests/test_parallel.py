"""tests/parallel.py: what each xdist worker keeps to itself; tests/marks.py: the lane check."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from tests import marks, parallel


def test_a_worker_moves_the_redis_database_up_by_its_index():
    assert parallel.redis_url_for_worker("redis://127.0.0.1:6379/5", 0) == (
        "redis://127.0.0.1:6379/5"
    )
    assert parallel.redis_url_for_worker("redis://127.0.0.1:6379/5", 3) == (
        "redis://127.0.0.1:6379/8"
    )
    assert parallel.redis_url_for_worker("redis://:pw@redis:6379", 2) == "redis://:pw@redis:6379/2"


def test_a_worker_past_the_last_redis_database_is_refused_in_words():
    with pytest.raises(RuntimeError, match="would use Redis database 16"):
        parallel.redis_url_for_worker("redis://127.0.0.1:6379/10", 6)


def test_this_process_uses_its_own_database_prefix_and_host(settings, db):
    from django.db import connection

    name = parallel.worker_id()
    if not name:
        assert parallel.suffix() == ""
        return
    assert os.environ["REDIS_URL"] == settings.REDIS_URL
    assert settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] == f"asgi-{name}"
    assert f"test-host-{name}" == settings.CANVAS_WORKER_HOST
    assert connection.settings_dict["NAME"].endswith(f"_{name}")  # pytest-django's suffix


def test_an_unmarked_worker_start_fails_naming_the_mark(request):
    with pytest.raises(pytest.fail.Exception, match=r"@pytest.mark.worker"):
        marks.require("worker")
    assert request.node.get_closest_marker("worker") is None


def _item(fixtures: dict[str, str], module: str, **names) -> SimpleNamespace:
    """A stand-in for a collected test: fixture name -> defining module, and a module."""

    def defined_in(where: str):
        func = lambda: None  # noqa: E731
        func.__module__ = where
        return [SimpleNamespace(func=func, scope="function")]

    info = SimpleNamespace(name2fixturedefs={n: defined_in(m) for n, m in fixtures.items()})
    return SimpleNamespace(_fixtureinfo=info, module=SimpleNamespace(__name__=module, **names))


def test_the_lanes_a_test_reaches_come_from_its_fixtures_folder_and_imports():
    from tests import docker_images  # not at the top: this module would need the docker mark

    assert marks.required_marks(_item({"start_worker": "tests.conftest"}, "tests.x")) == {"worker"}
    assert marks.required_marks(_item({"stack": "tests.faults.conftest"}, "tests.faults.y")) == {
        "faults"
    }
    assert marks.required_marks(_item({"browser": "tests.conftest"}, "tests.canvas.z")) == set()
    assert marks.required_marks(_item({}, "tests.browser.test_a")) == {"browser"}
    assert marks.required_marks(_item({}, "tests.w", docker_images=docker_images)) == {"docker"}


def test_items_sharing_an_id_get_their_own_so_xdist_runs_each():
    """Schemathesis' per-operation items share their function's id; under xdist only one of
    them would run. Collection gives each the id its name says."""
    from types import SimpleNamespace

    from tests.parallel import unique_ids

    items = [
        SimpleNamespace(_nodeid="t.py::test_x", name="test_x[GET /a]"),
        SimpleNamespace(_nodeid="t.py::test_x", name="test_x[POST /a]"),
        SimpleNamespace(_nodeid="t.py::test_y", name="test_y"),
    ]
    for item in items:
        item.nodeid = item._nodeid
    unique_ids(items)  # type: ignore[arg-type]
    assert [i._nodeid for i in items] == [
        "t.py::test_x[GET /a]",
        "t.py::test_x[POST /a]",
        "t.py::test_y",
    ]


def _collected(nodeid: str, group: str | None = None) -> SimpleNamespace:
    mark = SimpleNamespace(args=(group,)) if group else None
    return SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: mark)


def test_ids_left_shared_or_groups_left_off_stop_the_run_in_words():
    """Both used to shrink the run quietly: xdist ran one of several items sharing an id, and
    pytest 9.2 ignored the group suffix xdist writes, so loadgroup split every group."""
    fine = [_collected("t.py::a@g", "g"), _collected("t.py::b")]
    parallel.check_ids(fine, loadgroup=True)  # type: ignore[arg-type]
    with pytest.raises(pytest.UsageError, match="1 test ids are shared"):
        parallel.check_ids([_collected("t.py::a"), _collected("t.py::a")], loadgroup=False)  # type: ignore[arg-type]
    with pytest.raises(pytest.UsageError, match="did not group 1 tests"):
        parallel.check_ids([_collected("t.py::a", "g")], loadgroup=True)  # type: ignore[arg-type]
    parallel.check_ids([_collected("t.py::a", "g")], loadgroup=False)  # type: ignore[arg-type]
