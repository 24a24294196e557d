"""The embedded default (`make up`): how soon a fresh server process answers, and how soon an
event reaches an open conversation page.

Five starts (`--quick`: two) of `manage.py serve --prepare`, the process `make up` runs, with no
DATABASE_URL or REDIS_URL: SQLite in a scratch directory, the in-process worker and the
in-memory channel layer. A first, unmeasured start migrates and makes the demo login, an API
token and a finished scripted conversation. Then, per start, from the moment it is spawned:

- ready: /login/ answers;
- page: the page's socket (`/ws/ui/conversations/{id}/`, as the browser opens it) has sent
  `{"resume": N}` and got the last event back (resuming from N - 1), so it follows the log;
- first event: a message is posted through the API; until its event's fragment reaches the
  page socket (the first hint through this process's channel layer; the page's safety poll is
  set to 10 minutes, so a lost hint shows as a timeout, not as 5 s);
- run ended: the run the message started (one scripted `finish`) has its `run.finished` on the
  page: includes the worker warming up (LiteLLM) in the background.

    .venv/bin/python bench/first_event.py [--quick] [--json out.json]
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402

from tests.embedded_server import EmbeddedServer  # noqa: E402

STARTS = 5
QUICK_STARTS = 2
WAIT_SECONDS = 60.0
SAFETY_POLL_SECONDS = 600
SEQ = re.compile(r'data-seq="(\d+)"')
RUN_FINISHED = "event-run-finished"


def embedded_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    return env | {
        "CANVAS_VAR_DIR": str(common.scratch_dir() / "embedded"),
        "DJANGO_SETTINGS_MODULE": "canvas.settings",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "CANVAS_SAFETY_POLL_SECONDS": str(SAFETY_POLL_SECONDS),
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(common.REPO),
    }


def set_up(env: dict[str, str], log: Path) -> tuple[str, str]:
    """Migrate, the demo login, a token and a finished conversation: (token, conversation id)."""
    server = EmbeddedServer(env, prepare=True, log=log)
    try:
        if common.wait_http(f"{server.base}/login/", timeout=120, proc=server.process) is None:
            sys.exit(f"the embedded server did not answer; see {log}")
        server.token = subprocess.run(
            [common.PYTHON, "manage.py", "create_api_token", "demo"], cwd=common.REPO, env=env,
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        script = json.dumps({"script": [{"tool": "think", "args": {"thought": "ready"}}]})
        created = server.call("POST", "/conversations", {"prompt": script, "model": "scripted"})
        deadline = time.monotonic() + WAIT_SECONDS
        while server.call("GET", f"/conversations/{created['id']}")["status"] == "running":
            if time.monotonic() > deadline:
                sys.exit("the set-up run did not end")
            time.sleep(0.1)
        return server.token, created["id"]
    finally:
        server.stop()


async def frame_seqs(socket: Any) -> tuple[list[int], str]:
    frame = await socket.recv()
    return [int(s) for s in SEQ.findall(frame)], frame


async def one_start(env: dict[str, str], token: str, conversation: str, log: Path) -> dict:
    spawned = time.monotonic()
    server = EmbeddedServer(env, token, prepare=True, log=log)
    try:
        ready = await asyncio.to_thread(
            common.wait_http, f"{server.base}/login/", timeout=WAIT_SECONDS, proc=server.process
        )
        if ready is None:
            sys.exit(f"the embedded server did not answer; see {log}")
        path = f"/conversations/{conversation}"
        last = (await asyncio.to_thread(server.call, "GET", f"{path}/events"))["events"][-1]
        url = f"ws://127.0.0.1:{server.port}/ws/ui{path}/?token={token}"
        async with websockets.connect(url, max_size=None) as socket:
            await socket.send(json.dumps({"resume": last["seq"] - 1}))
            while last["seq"] not in (await asyncio.wait_for(frame_seqs(socket), 30))[0]:
                pass
            following = time.monotonic() - spawned
            posted = time.monotonic()
            sent = await asyncio.to_thread(
                server.call, "POST", f"{path}/messages", {"text": "are you there?"}
            )
            first_event = run_ended = None
            async with asyncio.timeout(WAIT_SECONDS):
                while run_ended is None:
                    seqs, frame = await frame_seqs(socket)
                    if first_event is None and sent["seq"] in seqs:
                        first_event = time.monotonic() - posted
                    if RUN_FINISHED in frame and seqs and max(seqs) > sent["seq"]:
                        run_ended = time.monotonic() - spawned
    finally:
        server.stop()
    assert first_event is not None
    return {
        "ready_s": ready,
        "page_following_s": following,
        "first_event_ms": first_event * 1000,
        "run_ended_s": run_ended,
    }


def main() -> None:
    options = common.arg_parser(__doc__.splitlines()[0]).parse_args()
    env = embedded_env()
    log = common.scratch_dir() / "first-event-server.log"
    token, conversation = set_up(env, log)
    starts = []
    for i in range(QUICK_STARTS if options.quick else STARTS):
        start = asyncio.run(one_start(env, token, conversation, log))
        starts.append(start)
        print(
            f"start {i + 1}: ready {start['ready_s']:.2f} s, page following "
            f"{start['page_following_s']:.2f} s, first event {start['first_event_ms']:.0f} ms, "
            f"run ended {start['run_ended_s']:.2f} s after spawn",
            flush=True,
        )
    medians = {k: statistics.median(s[k] for s in starts) for k in starts[0]}
    result = {"starts": starts, "median": medians, "load_avg": os.getloadavg()}
    print(
        f"median of {len(starts)}: ready {medians['ready_s']:.2f} s, first event "
        f"{medians['first_event_ms']:.0f} ms, run ended {medians['run_ended_s']:.2f} s"
    )
    common.write_results(options.json, result)


if __name__ == "__main__":
    main()
