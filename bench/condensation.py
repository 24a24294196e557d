"""Per-step cost over a long run with condensation on: does it stay flat?

One conversation of N `terminal` steps (`seq 1 300`, a 1.1 KB result each) (default 1,000) with the scripted model through LiteLLM, a
model profile whose `max_input_tokens` is small (default 60,000 tokens), so the condenser
summarises the oldest part many times in the run; the same run with a limit too large to be
reached is the comparison. Slices run in this process (step_overhead.run_in_process: the
next-slice enqueue captured). Per run: median step, the mean of the first and the last 10%
of steps (target: last / first <= 1.5) and how many condensations were recorded.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/condensation.py [--quick] [--json F]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402

STEPS = 1000
QUICK_STEPS = 200
LIMIT_TOKENS = 60_000
TARGET_RATIO = 1.5
PROFILES = {
    "benchcondensed": {"model": "canvas/scripted", "max_input_tokens": LIMIT_TOKENS,
                       "num_retries": 0},
    "benchunlimited": {"model": "canvas/scripted", "max_input_tokens": 10_000_000,
                       "num_retries": 0},
}  # fmt: skip


def _run(profile: str, steps: int) -> dict[str, Any]:
    import step_overhead

    from conversations import store
    from conversations.events import CondensationEvent
    from conversations.models import Conversation

    # Each step's result (300 lines, ~1.1 KB) is far larger than its line in the script (the
    # scripted model's prompt), so the history outgrows the limit while the prompt does not.
    turns = [{"tool": "terminal", "args": {"command": f"seq 1 300 # {i}",
                                           "security_risk": "LOW"}} for i in range(steps)]  # fmt: skip
    prompt = {"script": turns,
              "summary": "## Task\nprint\n## Progress\nprinting\n## Files touched\nnone"}  # fmt: skip
    result = step_overhead.run_in_process(profile, profile, json.dumps(prompt), steps)
    conversation = Conversation.objects.order_by("-created_at").first()
    events = [s.event for s in store.load(conversation.pk)]
    result["condensations"] = sum(isinstance(e, CondensationEvent) for e in events)
    first, last = result.get("first10_ms"), result.get("last10_ms")
    result["last_over_first"] = last / first if first and last else None
    return result


def main() -> None:
    options = common.arg_parser(__doc__.splitlines()[0]).parse_args()
    common.setup_django(
        {
            "CANVAS_MODEL_PROFILES": json.dumps(PROFILES),
            "SECRET_KEY": os.environ.get("SECRET_KEY", "bench-only-not-a-secret"),
        }
    )
    steps = QUICK_STEPS if options.quick else STEPS
    runs = {profile: _run(profile, steps) for profile in PROFILES}
    condensed = runs["benchcondensed"]
    ratio = condensed["last_over_first"]
    result = {"steps": steps, "limit_tokens": LIMIT_TOKENS, "runs": runs,
              "ok": ratio is not None and ratio <= TARGET_RATIO
              and condensed["status"] == "finished" and condensed["condensations"] > 0,
              "load_avg": os.getloadavg()}  # fmt: skip
    for profile, run in runs.items():
        stats = run
        print(
            f"{profile}: {run['status']}, {run['condensations']} condensations, median "
            f"{stats.get('median_ms', float('nan')):.1f} ms/step, first 10% "
            f"{stats.get('first10_ms', float('nan')):.1f} ms, last 10% "
            f"{stats.get('last10_ms', float('nan')):.1f} ms "
            f"(last/first {run['last_over_first'] or float('nan'):.2f})"
        )
    common.write_results(options.json, result)


if __name__ == "__main__":
    main()
