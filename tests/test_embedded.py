"""The embedded default (`make up`): SQLite, in-memory broker and channel layer, the worker
inside the process. Run as real subprocesses with no Postgres or Redis in their environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import REPO, wait_for
from tests.faults.services import free_port

pytestmark = pytest.mark.timeout(240)


def embedded_env(var_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env["CANVAS_VAR_DIR"] = str(var_dir)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return env


def manage(env, *args, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True,
        text=True, timeout=timeout,
    )  # fmt: skip


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    env = embedded_env(tmp_path_factory.mktemp("embedded"))
    migrated = manage(env, "migrate", "--noinput")
    assert migrated.returncode == 0, migrated.stderr
    return env


def test_run_conversation_with_the_demo_model_finishes(env, tmp_path):
    workspace = tmp_path / "ws"
    result = manage(env, "run_conversation", "--model", "demo", "--workspace", str(workspace),
                    "write me a program")  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("#1 system.prompt")
    assert any("NameError" in line for line in lines)  # the demo's deliberate mistake
    assert lines[-1].startswith(f"#{len(lines)} run.finished")
    assert "finished" in lines[-1]
    assert "fizzbuzz(i)" in (workspace / "fizzbuzz.py").read_text()


def test_run_conversation_json_lines_and_nonzero_exit_when_not_finished(env, tmp_path):
    script = json.dumps({"script": [{"tool": "think", "args": {"thought": "a"}}] * 3})
    result = manage(env, "run_conversation", "--json", "--model", "scripted",
                    "--max-iterations", "1", "--workspace", str(tmp_path), script)  # fmt: skip
    assert result.returncode == 1
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert records[-1]["type"] == "run.finished" and records[-1]["status"] == "error"
    assert any(r["type"] == "agent.error" and r["code"] == "max_iterations" for r in records)
    assert "ended error" in result.stderr


def test_serve_runs_a_conversation_with_its_in_process_worker(env):
    assert manage(env, "ensure_demo_user").returncode == 0
    token = manage(env, "create_api_token", "demo").stdout.strip()
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}/api"

    def call(method: str, path: str, body=None) -> dict:
        request = urllib.request.Request(
            base + path, method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def up() -> bool:
        try:
            return isinstance(call("GET", "/conversations"), list)
        except OSError:
            return False

    try:
        wait_for(up, 60, 0.2, "the embedded server to answer")
        created = call("POST", "/conversations", {"prompt": "show me", "model": "demo"})
        finished = wait_for(
            lambda: call("GET", f"/conversations/{created['id']}")["status"] == "finished",
            90, 0.2, "the demo run to finish",
        )  # fmt: skip
        assert finished
        events = call("GET", f"/conversations/{created['id']}/events")["events"]
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert sum(e["type"] == "tool.call" for e in events) == 6
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(5)
    assert server.returncode is not None
