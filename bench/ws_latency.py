"""Latency from an event's append to its arrival on a websocket client.

A real server (`manage.py serve`: uvicorn, production mode, Redis pub/sub channel layer) runs
as a subprocess. This process appends events with `store.append` (as a worker would: commit,
then publish to Redis) and, on the same clock, receives them as a token-authenticated client
of `/ws/conversations/{id}/events?after_seq=N`. Latency is receipt time minus the time
`append` returned (the commit and the hand-off to the publisher are done by then); each
event's content also carries its wall-clock send time. Percentiles leave out the first
WARM_UP events (connection set-up, reported as the first event's latency).

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/ws_latency.py [--quick]
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402

EVENTS = 500
QUICK_EVENTS = 100
GAP_SECONDS = 0.005
"""Pause between appends: a busy agent, not a bulk load."""
RECEIVE_TIMEOUT = 30.0
WARM_UP = 10
"""Leading events left out of the percentiles: the first publish from a process opens its
Redis connection and starts the publisher loop (tens of ms, once). Reported separately."""


def _setup_conversation() -> tuple[str, str, int]:
    """A user, their API token and a conversation with one event; returns (id, token, seq)."""
    from django.contrib.auth import get_user_model

    from conversations.models import Conversation
    from teams.tokens import api_token_create

    user = get_user_model().objects.create_user(f"bench-{uuid.uuid4().hex[:8]}")
    _, token = api_token_create(user=user, name="ws-latency bench")
    conversation_id = common.quiet_conversation(owner=user, title="ws latency benchmark")
    seq = Conversation.objects.values_list("last_seq", flat=True).get(pk=conversation_id)
    return conversation_id, token, seq


def _append_loop(conversation_id: str, count: int, committed: dict[int, float]) -> None:
    from django.db import connection

    from conversations import store
    from conversations.events import ObservationEvent

    try:
        for i in range(count):
            content = json.dumps({"i": i, "sent": time.time()})
            event = ObservationEvent(tool_call_id=f"call_{i}", tool="think", content=content)
            (stored,) = store.append(conversation_id, [event])
            committed[stored.seq] = time.perf_counter()
            time.sleep(GAP_SECONDS)
    finally:
        connection.close()


async def _measure(url: str, token: str, conversation_id: str, count: int) -> dict[str, Any]:
    from websockets.asyncio.client import connect

    committed: dict[int, float] = {}
    received: dict[int, float] = {}
    wall_delays: list[float] = []
    async with connect(
        url, additional_headers={"Authorization": f"Bearer {token}"}, compression=None
    ) as ws:
        appender = threading.Thread(
            target=_append_loop, args=(conversation_id, count, committed), daemon=True
        )
        appender.start()
        deadline = time.monotonic() + RECEIVE_TIMEOUT + count * GAP_SECONDS
        while len(received) < count and time.monotonic() < deadline:
            try:
                frame = await asyncio.wait_for(ws.recv(), timeout=1.0)
            except TimeoutError:
                continue
            now, wall = time.perf_counter(), time.time()
            record = json.loads(frame)
            if record.get("type") != "tool.result":
                continue
            received[record["seq"]] = now
            wall_delays.append((wall - json.loads(record["content"])["sent"]) * 1000)
        appender.join(timeout=RECEIVE_TIMEOUT)
    every = [(received[s] - committed[s]) * 1000 for s in sorted(received) if s in committed]
    latencies = every[WARM_UP:]
    return {
        "events": count,
        "received": len(received),
        "first_event_ms": every[0] if every else float("nan"),
        "warm_up_events": min(WARM_UP, len(every)),
        "p50_ms": common.percentile(latencies, 50),
        "p95_ms": common.percentile(latencies, 95),
        "p99_ms": common.percentile(latencies, 99),
        "max_ms": max(latencies, default=float("nan")),
        "mean_ms": statistics.fmean(latencies) if latencies else float("nan"),
        "from_send_p50_ms": common.percentile(wall_delays, 50),
    }


def main() -> None:
    options = common.arg_parser(__doc__.splitlines()[0]).parse_args()
    common.setup_django()
    count = QUICK_EVENTS if options.quick else EVENTS
    with common.serving("ws-server.log") as (base, _server):
        conversation_id, token, seq = _setup_conversation()
        ws_base = base.replace("http://", "ws://", 1)
        url = f"{ws_base}/ws/conversations/{conversation_id}/events?after_seq={seq}"
        result = asyncio.run(_measure(url, token, conversation_id, count))
    result["load_avg"] = os.getloadavg()
    print(
        f"append -> websocket, {result['received']}/{result['events']} events: "
        f"p50 {result['p50_ms']:.1f} ms, p95 {result['p95_ms']:.1f} ms, "
        f"p99 {result['p99_ms']:.1f} ms, max {result['max_ms']:.1f} ms after "
        f"{result['warm_up_events']} warm-up events (first event: "
        f"{result['first_event_ms']:.1f} ms; from before append: p50 "
        f"{result['from_send_p50_ms']:.1f} ms)"
    )
    common.write_results(options.json, result)


if __name__ == "__main__":
    main()
