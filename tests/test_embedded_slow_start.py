"""The embedded worker on a loaded machine: however slowly it starts, it announces its host once
it is up and keeps beating, and a run posted meanwhile finishes rather than being judged
stranded on a gone host. Once, a start past 30 s raised in the announcing thread: the worker ran
jobs but never sent a heartbeat, and the sweeper ended its runs with an error telling the user
to start a worker host, which the embedded mode has no use for."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from orchestration.chain.stranded import gone_message
from orchestration.models import WorkerHost
from tests.conftest import REPO
from tests.runs import script
from tests.test_embedded import embedded_env

pytestmark = pytest.mark.timeout(180)

START_DELAY = 3.0
"""How long the worker takes to build: many sweeps and gone periods (below) long."""

SLOW_START = """
import json, os, sys, threading, time
import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "canvas.settings")
django.setup()
from django.conf import settings
from django.core.management import call_command
from canvas import embedded
from conversations.models import Conversation
from orchestration import services
from orchestration.models import WorkerHost

delay, prompt, workspace = float(sys.argv[1]), sys.argv[2], sys.argv[3]
call_command("migrate", "--noinput", verbosity=0)  # in this process: one start-up less
embedded.SLOW_START_SECONDS = delay / 4  # the warning period, kept short here
raised = []
threading.excepthook = lambda args: raised.append(repr(args.exc_value))
build = embedded._ReadyWorkController.__init__

def slow_build(self, *args, **kwargs):
    time.sleep(delay)  # a loaded machine: importing and building the worker takes this long
    build(self, *args, **kwargs)

embedded._ReadyWorkController.__init__ = slow_build
began = time.monotonic()
with embedded.embedded_worker(wait=False):  # as `serve` starts it
    conversation = services.conversation_create(
        owner=None, model="scripted", prompt=prompt, workspace=workspace,
        unrestricted_workspace=True,
    )
    while time.monotonic() - began < 90:
        row = Conversation.objects.get(pk=conversation.pk)
        if row.status != "running":
            break
        time.sleep(0.1)
    ended = time.monotonic() - began
    host = WorkerHost.objects.get(host=settings.CANVAS_WORKER_HOST)
    first_beat = host.last_seen
    time.sleep(4 * settings.CANVAS_WORKER_HEARTBEAT_SECONDS)
    host.refresh_from_db()
    print(json.dumps({
        "status": row.status, "ended": ended, "raised": raised,
        "announced": bool(host.version) and host.started_at is not None,
        "stopped": host.stopped_at is not None, "beat_again": host.last_seen > first_beat,
    }))
"""


def test_a_slow_embedded_start_is_announced_and_its_run_finishes(tmp_path):
    env = embedded_env(tmp_path / "var")
    # Sweeps, heartbeats and the gone period far shorter than the start: before the worker
    # was announced, its host would have been judged gone and the run ended.
    env.update(
        CANVAS_SWEEP_SECONDS="0.2", CANVAS_WORKER_HEARTBEAT_SECONDS="0.2",
        CANVAS_WORKER_GONE_SECONDS="1",
    )  # fmt: skip
    prompt = script(
        {"tool": "think", "args": {"thought": "slow"}},
        {"tool": "finish", "args": {"message": "done"}},
    )
    done = subprocess.run(
        [sys.executable, "-c", SLOW_START, str(START_DELAY), prompt, str(tmp_path / "ws")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=150,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["status"] == "finished", (report, done.stderr)
    assert report["ended"] > START_DELAY  # the run waited for the worker, as it should
    assert report["raised"] == []
    assert report["announced"] and not report["stopped"] and report["beat_again"], report
    assert "still starting after" in done.stderr  # said, never given up on


def test_the_embedded_mode_never_asks_for_a_worker_host_to_be_started(settings):
    settings.EMBEDDED = True
    settings.CANVAS_WORKER_HOST = "laptop-1a2b3c"
    seen = datetime(2026, 12, 3, 18, 0, tzinfo=UTC)
    ours = WorkerHost(host="laptop-1a2b3c", version="1.0", last_seen=seen)
    other = WorkerHost(host="old-box", version="1.0", last_seen=seen, stopped_at=seen)
    mine, theirs = gone_message(ours), gone_message(other)
    for message in (mine, theirs):
        assert "Start a worker" not in message and "Once a worker with" not in message
    assert mine.startswith("This server's built-in worker (host 'laptop-1a2b3c') stopped")
    assert "restart the server" in mine
    assert "'old-box') shut down at 2026-12-03 18:00:00 UTC" in theirs
    assert "This server's worker is host 'laptop-1a2b3c'" in theirs

    settings.EMBEDDED = False  # production still names the worker host to bring back
    assert "Once a worker with CANVAS_WORKER_HOST=laptop-1a2b3c runs" in gone_message(
        WorkerHost(host="laptop-1a2b3c", version="1.0", last_seen=seen - timedelta(hours=1))
    )


@pytest.mark.django_db
def test_the_embedded_page_waits_for_its_own_worker_not_for_one_to_be_started(
    user, client, dispatched, settings
):
    from conversations.models import Conversation
    from orchestration import services

    conversation = services.conversation_create(owner=user, model="scripted", prompt=script())
    Conversation.objects.filter(pk=conversation.pk).update(worker_host="laptop-1a2b3c")
    client.force_login(user)
    settings.EMBEDDED = True
    page = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert "Waiting for the worker built into the server (host <code>laptop-1a2b3c</code>)" in page
    assert "not running a worker" not in page
