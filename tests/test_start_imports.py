"""Pay for what you use at start: a worker and the command line start without LiteLLM (seconds
of CPU to import). A worker that may run a model loads it in the background once it has said
it is ready; the scripted and demo models never load it. (The web process: test_web_imports.)

Imports are read from Python's own `-X importtime` report (PYTHONPROFILEIMPORTTIME), which the
process writes to stderr as each module is first imported, so the log says what was imported
by the time the worker announced itself ready, and whether LiteLLM came after."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from canvas.celery import _may_run_a_model
from tests.conftest import REPO, _database_url, wait_for


def imported(module: str, report: str, *, or_within: bool = False) -> bool:
    """Whether the import report names `module` (or, `or_within`, one of its submodules). It
    names what an import statement imports; `importlib.import_module` alone goes unreported,
    but the statements inside the module it imports are."""
    within = r"(\.\S+)?" if or_within else ""
    line = rf"^import time:.*\|\s+{re.escape(module)}{within}$"
    return re.search(line, report, re.MULTILINE) is not None


def imported_litellm(report: str) -> bool:
    return imported("litellm", report, or_within=True)


@pytest.mark.worker
def test_a_worker_starts_without_litellm(start_worker):
    worker = start_worker(extra_env={"PYTHONPROFILEIMPORTTIME": "1", "CANVAS_LLM_WARM_UP": "0"})
    at_ready = worker.log_path.read_text()
    assert imported("canvas.celery", at_ready)  # the import report is there to read
    assert not imported_litellm(at_ready)


@pytest.mark.worker
def test_a_worker_loads_litellm_in_the_background_once_ready(start_worker):
    worker = start_worker(extra_env={"PYTHONPROFILEIMPORTTIME": "1", "CANVAS_LLM_WARM_UP": "1"})
    # The ready file is written by the first worker_ready receiver, the warm-up starts after:
    # LiteLLM's own line comes when its import ends, seconds later (its submodules' may
    # already be there).
    assert not imported("litellm", worker.log_path.read_text())
    wait_for(
        lambda: imported("litellm", worker.log_path.read_text()), timeout=120,
        message="the worker never warmed LiteLLM up",
    )  # fmt: skip
    assert worker.proc.poll() is None


def test_only_a_worker_that_may_run_a_model_warms_litellm_up():
    def app(*queues: str) -> SimpleNamespace:
        consumed = {q: object() for q in queues}
        return SimpleNamespace(amqp=SimpleNamespace(queues=SimpleNamespace(consume_from=consumed)))

    assert _may_run_a_model(app("celery", "host.a"))
    assert _may_run_a_model(app("acp", "acp.host.a", "host.a"))
    assert not _may_run_a_model(app("acp", "acp.host.a"))  # `-Q acp`: external agents only


def test_the_command_line_runs_the_scripted_model_without_litellm(transactional_db, tmp_path):
    """`run_conversation --model scripted`, four steps, with its in-process worker (no
    REDIS_URL) on the test database: nothing in the run imports LiteLLM."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env |= {
        "DATABASE_URL": _database_url(),
        "PYTHONPROFILEIMPORTTIME": "1",
        "CANVAS_SCRIPTED_THROUGH_LITELLM": "false",  # as a newcomer runs it
        "CANVAS_WORKSPACES_ROOT": str(tmp_path / "workspaces"),
        "CANVAS_STATE_ROOT": str(tmp_path / "state"),
    }
    steps = [{"tool": "think", "args": {"thought": str(i)}} for i in range(3)]
    prompt = json.dumps({"script": [*steps, {"tool": "finish", "args": {"message": "done"}}]})
    done = subprocess.run(
        [sys.executable, "manage.py", "run_conversation", "--model", "scripted",
         "--workspace", str(tmp_path / "ws"), prompt],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert done.stdout.splitlines()[-1].startswith("#") and "finished" in done.stdout
    assert imported("orchestration.step.scripted", done.stderr)  # the model was played here
    assert not imported_litellm(done.stderr)
