"""How big and how slow a long conversation's page is: a 1,000-event conversation rendered.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/page_size.py [--quick] [--json out.json]

A scripted run of think and terminal steps (each terminal output 40 lines) is driven in this
process until the log holds about 1,000 events (--quick: 200), then its page is fetched through
Django's test client as its owner, five times: HTML bytes (raw and gzipped), bytes per event,
and the median render time. Uses the bench database (bench/_common.py).
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="About 200 events.")
    parser.add_argument("--json", type=Path, help="Write the results here.")
    options = parser.parse_args()
    common.setup_django({"SECRET_KEY": "bench-only-not-a-secret"})

    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    from orchestration.chain.slices import run_slice
    from orchestration.services import conversation_create
    from teams.services import team_create
    from tests.runs import script

    steps = 100 if options.quick else 495  # a step is a call and its result: two events
    output = "; ".join(f"echo line {i} of a long output" for i in range(40))
    turns = [
        {"tool": "terminal", "args": {"command": output}}
        if i % 2
        else {"tool": "think", "args": {"thought": f"step {i}: **thinking** about `code`"}}
        for i in range(steps)
    ]
    user = get_user_model().objects.create_user(f"bench-{time.time_ns()}", password="x-bench-1")
    team_create(user=user, name=f"bench {user.username}")
    with common.captured_enqueues() as sent:
        conversation = conversation_create(
            owner=user, model="scripted", prompt=script(*turns, {"say": "done"}),
            max_iterations=steps + 10,
        )  # fmt: skip
        while sent:
            run_slice(*sent.pop(0))
    conversation.refresh_from_db()
    client = Client()
    client.force_login(user)
    url = reverse("conversation-detail", args=[conversation.pk])
    timings, body = [], b""
    for _ in range(5):
        started = time.perf_counter()
        response = client.get(url)
        timings.append((time.perf_counter() - started) * 1000)
        body = response.content
    result = {
        "events": conversation.last_seq,
        "html_bytes": len(body),
        "gzip_bytes": len(gzip.compress(body)),
        "bytes_per_event": len(body) / max(1, conversation.last_seq),
        "render_median_ms": statistics.median(timings),
        "status": conversation.status,
    }
    print(json.dumps(result, indent=2))
    if options.json:
        options.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
