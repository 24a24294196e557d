"""Live events in the embedded mode (`make up`): a fresh `manage.py serve` process pushes an
appended event to an open websocket at once, through the in-memory channel layer, not through
the consumers' safety poll.

Once, a fresh process delivered events only in 5-second batches for its whole life: a consumer
and the publisher thread had each made their own in-memory layer (canvas.apps now makes the one
layer at start-up). The poll is set far longer than the wait here, so a hint that goes nowhere
fails the test instead of arriving a few seconds late.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import websockets

from tests.conftest import REPO, wait_for
from tests.embedded_server import EmbeddedServer, prepared_var
from tests.test_embedded import embedded_env, manage

pytestmark = pytest.mark.timeout(300)

FRESH_PROCESSES = 3
SAFETY_POLL_SECONDS = 600.0
HINT_WAIT_SECONDS = 30.0
"""Far under the poll: an event arriving within it came through the channel layer."""


@pytest.fixture(scope="module")
def served_env(tmp_path_factory) -> tuple[dict[str, str], str]:
    env = embedded_env(tmp_path_factory.mktemp("embedded-live"))
    env["CANVAS_SAFETY_POLL_SECONDS"] = str(SAFETY_POLL_SECONDS)
    prepared_var(Path(env["CANVAS_VAR_DIR"]))
    token = manage(env, "create_api_token", "demo").stdout.strip()
    return env, token


async def first_hint_seconds(server: EmbeddedServer) -> float:
    """Seconds from posting a message to its event on a socket that was already following."""
    script = json.dumps({"script": [{"tool": "think", "args": {"thought": "ready"}}]})
    created = server.call("POST", "/conversations", {"prompt": script, "model": "scripted"})
    path = f"/conversations/{created['id']}"
    wait_for(lambda: server.call("GET", path)["status"] != "running", 60, 0.1, "the run to end")
    last = server.call("GET", f"{path}/events")["events"][-1]["seq"]
    url = (
        f"ws://127.0.0.1:{server.port}/ws/conversations/{created['id']}/events"
        f"?after_seq={last - 1}&token={server.token}"
    )
    async with websockets.connect(url) as socket:
        # The last event, replayed: the consumer has joined the group and caught up.
        assert json.loads(await asyncio.wait_for(socket.recv(), 30))["seq"] == last
        started = time.monotonic()
        await asyncio.to_thread(server.call, "POST", f"{path}/messages", {"text": "hello"})
        event = json.loads(await asyncio.wait_for(socket.recv(), HINT_WAIT_SECONDS))
        elapsed = time.monotonic() - started
    assert (event["seq"], event["type"]) == (last + 1, "message.user")
    return elapsed


def test_each_fresh_server_pushes_its_first_event_through_the_channel_layer(served_env):
    env, token = served_env
    latencies = []
    for _ in range(FRESH_PROCESSES):
        server = EmbeddedServer(env, token)
        try:
            wait_for(server.answering, 60, 0.1, "the embedded server to answer")
            latencies.append(asyncio.run(first_hint_seconds(server)))
        finally:
            server.stop()
    assert len(latencies) == FRESH_PROCESSES
    assert max(latencies) < HINT_WAIT_SECONDS < SAFETY_POLL_SECONDS, latencies


def test_the_layer_is_made_at_start_up_so_threads_share_it(served_env):
    """The registry has the layer before any thread asks; threads asking together get it."""
    env, _ = served_env
    probe = (
        "import threading, django; django.setup()\n"
        "from channels.layers import channel_layers, get_channel_layer\n"
        "made = channel_layers.backends.get('default')\n"
        "got = []\n"
        "threads = [threading.Thread(target=lambda: got.append(get_channel_layer()))"
        " for _ in range(8)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "print(type(made).__name__, all(layer is made for layer in got))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60,
        env={**env, "DJANGO_SETTINGS_MODULE": "canvas.settings"},
    )  # fmt: skip
    assert result.stdout.split() == ["ThreadSafeInMemoryChannelLayer", "True"], result.stderr
