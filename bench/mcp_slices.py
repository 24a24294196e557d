"""What a run's MCP servers cost per slice: started once per run, or for every slice.

One conversation of N steps (default 40), each a call to the test suite's MCP stdio server
(tests/orchestration/mcp/server_fixture.py, written with the `mcp` package, sandboxed as any
stdio server: `echo` of a different text each step), one step per slice (`CANVAS_SLICE_STEPS=1`, the worst case; the default is 5),
the scripted model, slices in this process (the next-slice enqueue captured). Twice: with the
servers kept between slices (orchestration/mcp/pool.py, the default) and with
`CANVAS_MCP_KEEP_SECONDS=0` (started and stopped every slice, as before the pool). Reports ms
per step (the median gap between consecutive results) and the ratio.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/mcp_slices.py [--quick] [--json F]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402

STEPS = 40
QUICK_STEPS = 10
REPO = Path(__file__).resolve().parent.parent
SERVER = REPO / "tests" / "orchestration" / "mcp" / "server_fixture.py"


def _run(steps: int, keep_seconds: float) -> dict[str, Any]:
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from conversations import store
    from conversations.events import ObservationEvent
    from conversations.models import Conversation
    from orchestration.chain.slices import run_slice
    from orchestration.mcp.servers import mcp_server_create
    from orchestration.services import conversation_create
    from teams.services import team_create

    settings.CANVAS_MCP_KEEP_SECONDS = keep_seconds
    user = get_user_model().objects.create_user(f"bench-{uuid.uuid4().hex[:8]}")
    team = team_create(user=user, name=f"{user.get_username()}'s team")
    mcp_server_create(by=user, team=team, name="files", transport="stdio",
                      command=sys.executable, args=[str(SERVER)])  # fmt: skip
    turns = [{"tool": "mcp__files__echo", "args": {"text": f"step {i}", "security_risk": "LOW"}}
             for i in range(steps)]  # fmt: skip
    finish = {"tool": "finish", "args": {"message": "done"}}
    prompt = json.dumps({"script": [*turns, finish]})
    with common.captured_enqueues() as sent:
        conversation = conversation_create(owner=user, prompt=prompt, model="scripted",
                                           max_iterations=steps + 10)  # fmt: skip
        started = time.perf_counter()
        slices = 0
        while sent:
            run_slice(*sent.pop(0))
            slices += 1
        wall = time.perf_counter() - started
    stored = store.load(conversation.pk)
    results = [s for s in stored if isinstance(s.event, ObservationEvent)
               and s.event.tool.startswith("mcp__files__")]  # fmt: skip
    gaps = [(b.created_at - a.created_at).total_seconds() * 1000
            for a, b in zip(results, results[1:], strict=False)]  # fmt: skip
    return {
        "keep_seconds": keep_seconds,
        "status": Conversation.objects.get(pk=conversation.pk).status,
        "slices": slices, "wall_s": round(wall, 2),
        "median_ms_per_step": statistics.median(gaps) if gaps else None,
        "errors": sum(1 for s in results if s.event.is_error),
    }  # fmt: skip


def main() -> None:
    options = common.arg_parser(__doc__.splitlines()[0]).parse_args()
    common.setup_django({
        "SECRET_KEY": os.environ.get("SECRET_KEY", "bench-only-not-a-secret"),
        "CANVAS_SLICE_STEPS": "1",
        # What the sandbox must show for the server to run: the venv and the server's folder.
        "CANVAS_SANDBOX_READONLY_PATHS": ",".join([sys.prefix, sys.base_prefix,
                                                   str(SERVER.parent)]),
    })  # fmt: skip
    steps = QUICK_STEPS if options.quick else STEPS
    kept = _run(steps, 60.0)
    fresh = _run(steps, 0.0)
    ratio = (
        fresh["median_ms_per_step"] / kept["median_ms_per_step"]
        if kept["median_ms_per_step"] and fresh["median_ms_per_step"] else None
    )  # fmt: skip
    result = {"steps": steps, "kept": kept, "started_every_slice": fresh,
              "every_slice_over_kept": ratio,
              "ok": kept["status"] == fresh["status"] == "finished"
              and not kept["errors"] and not fresh["errors"],
              "load_avg": os.getloadavg()}  # fmt: skip
    for name, run in (("kept between slices", kept), ("started every slice", fresh)):
        print(f"{name}: {run['status']}, {run['slices']} slices, "
              f"{run['median_ms_per_step']:.1f} ms/step")  # fmt: skip
    print(f"every slice / kept: {ratio:.2f}x" if ratio else "no ratio")
    common.write_results(options.json, result)


if __name__ == "__main__":
    main()
