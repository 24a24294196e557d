"""Pay for what you use at start: a worker and the command line start without LiteLLM (seconds
of CPU to import), and without the MCP SDK, the ACP SDK or Docker's client unless the run uses
them. A worker that may run a model loads LiteLLM in the background once it has said it is
ready; the scripted and demo models never load it. (The web process: test_web_imports.)

A worker's imports are read from Python's own `-X importtime` report (PYTHONPROFILEIMPORTTIME),
which the process writes to stderr as each module is first imported, so the log says what was
imported by the time the worker announced itself ready, and whether LiteLLM came after. The
command line's are its `sys.modules` as it exits, after its in-process worker has stopped."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from acp_bridge.process import MESSAGE_LIMIT_BYTES
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


UNUSED = ("mcp", "mcp_types", "acp", "docker")
"""The MCP SDK (and its types), the ACP SDK, Docker's client: for a run that has an MCP server,
an external agent or a container, never at start (over a second of CPU for the first two)."""


def imported_unused(report: str) -> list[str]:
    return [name for name in UNUSED if imported(name, report, or_within=True)]


MODULES_AT_EXIT = """
import atexit, runpy, sys
atexit.register(lambda: print("sys.modules:", *sorted(sys.modules), file=sys.stderr))
runpy.run_path("manage.py", run_name="__main__")
"""
"""`manage.py ARGS` that prints, as it exits, every module it imported (atexit handlers run
after the interpreter has joined the in-process worker's threads)."""


def modules_at_exit(stderr: str) -> set[str]:
    (line,) = [line for line in stderr.splitlines() if line.startswith("sys.modules: ")]
    return set(line.split()[1:])


def top_level(modules: set[str]) -> set[str]:
    return {module.split(".")[0] for module in modules}


@pytest.mark.worker
def test_a_worker_starts_without_litellm_or_the_mcp_acp_and_docker_clients(start_worker):
    worker = start_worker(extra_env={"PYTHONPROFILEIMPORTTIME": "1", "CANVAS_LLM_WARM_UP": "0"})
    at_ready = worker.log_path.read_text()
    assert imported("canvas.celery", at_ready)  # the import report is there to read
    assert imported("orchestration.title_model", at_ready)  # and orchestration.tasks' imports
    assert not imported_litellm(at_ready)
    assert imported_unused(at_ready) == []


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


def test_the_command_line_runs_the_scripted_model_without_litellm_mcp_acp_or_docker(
    transactional_db, tmp_path
):
    """`run_conversation --model scripted`, four steps, with its in-process worker (no
    REDIS_URL) on the test database and no MCP server: nothing in the run imports LiteLLM, the
    MCP or ACP SDKs, or Docker's client."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env |= {
        "DATABASE_URL": _database_url(),
        "CANVAS_SCRIPTED_THROUGH_LITELLM": "false",  # as a newcomer runs it
        "CANVAS_WORKSPACES_ROOT": str(tmp_path / "workspaces"),
        "CANVAS_STATE_ROOT": str(tmp_path / "state"),
    }
    steps = [{"tool": "think", "args": {"thought": str(i)}} for i in range(3)]
    prompt = json.dumps({"script": [*steps, {"tool": "finish", "args": {"message": "done"}}]})
    done = subprocess.run(
        [sys.executable, "-c", MODULES_AT_EXIT, "run_conversation", "--model", "scripted",
         "--workspace", str(tmp_path / "ws"), prompt],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert done.stdout.splitlines()[-1].startswith("#") and "finished" in done.stdout
    modules = modules_at_exit(done.stderr)
    # The model was played here, and the run went through the MCP gate of its slices.
    assert {"orchestration.step.scripted", "orchestration.mcp.slice"} <= modules
    assert "orchestration.mcp.offer" not in modules  # no server: the gate let nothing through
    assert top_level(modules) & {"litellm", "openai", "tiktoken", *UNUSED} == set()


def test_the_agent_step_imports_no_sdk_it_may_not_use():
    """What a worker imports to run our agent's slice (the runner, its MCP gate, the chain)
    holds no LiteLLM, MCP or ACP SDK and no Docker client: each is imported where it is used."""
    probe = (
        "import sys, django; django.setup()\n"
        "import canvas.celery, orchestration.tasks, orchestration.chain.slices\n"
        "import orchestration.step.runner, orchestration.mcp.slice, orchestration.mcp.servers\n"
        "print(*sorted({m.split('.')[0] for m in sys.modules}))"
    )
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "DJANGO_SETTINGS_MODULE": "canvas.settings",
    }
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = set(done.stdout.split())
    assert "orchestration" in loaded
    assert loaded & {"litellm", "openai", "tiktoken", *UNUSED} == set()


def test_the_process_bridge_takes_the_acp_sdks_message_limit():
    """acp_bridge.process names the limit rather than importing the ACP SDK for it (an MCP
    server's process runs through it too): it must stay the SDK's own."""
    from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES

    assert MESSAGE_LIMIT_BYTES == DEFAULT_STDIO_BUFFER_LIMIT_BYTES
