"""What the command sandbox costs per command: `true` through bwrap vs as a plain process.

Two levels, each N times (default 50), sandboxed and plain, interleaved so load drifts hit
both alike:
- launcher: `workspaces.sandbox.popen(spec, ["true"])` vs `subprocess.Popen(["true"])`;
- workspace: `LocalWorkspace.run("true")`, the terminal tool's whole path (wrapper script,
  state save and restore), with the sandbox vs with it off (CANVAS_UNSANDBOXED_COMMANDS).
Needs no database or Redis.

    .venv/bin/python bench/sandbox_overhead.py [--count 50] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "canvas.settings")


def _time(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": statistics.median(ordered),
        "p95_ms": ordered[max(0, round(0.95 * len(ordered)) - 1)],
        "mean_ms": statistics.fmean(ordered),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--json", type=Path, help="Write the results here.")
    parser.add_argument("--quick", action="store_true", help="10 of each, for a smoke run.")
    options = parser.parse_args()
    if options.quick:
        options.count = 10

    import django

    django.setup()
    logging.getLogger("workspaces.sandbox").setLevel(logging.ERROR)  # the "plain" runs' probe
    from django.test import override_settings

    from workspaces import sandbox
    from workspaces.local import LocalWorkspace

    status = sandbox.sandbox_status()
    if not status.available:
        sys.exit(f"bench: no working sandbox here ({status.reason})")

    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as scratch:
        root, state = Path(scratch) / "root", Path(scratch) / "state"
        ws = LocalWorkspace(root, state)
        spec = sandbox.SandboxSpec(cwd=root, writable=(root,), env={"PATH": sandbox.PATH})

        def run_true() -> None:
            assert ws.run("true", timeout=30).exit_code == 0

        def launcher(sandboxed: bool) -> float:
            if sandboxed:
                return _time(lambda: sandbox.popen(spec, ["true"]).wait())
            return _time(lambda: subprocess.Popen(["true"], env=spec.env, cwd=root).wait())

        def workspace(sandboxed: bool) -> float:
            if sandboxed:
                return _time(run_true)
            # The probe result is cached, so the plain samples do not pay for it.
            with override_settings(CANVAS_BWRAP="/bin/false", CANVAS_UNSANDBOXED_COMMANDS=True):
                sandbox.sandbox_status.cache_clear()
                sandbox.sandbox_status()
                try:
                    return _time(run_true)
                finally:
                    sandbox.sandbox_status.cache_clear()
                    sandbox.sandbox_status()

        results: dict[str, object] = {"count": options.count, "binary": status.binary}
        for name, call in (("launcher", launcher), ("workspace", workspace)):
            call(True), call(False)  # warm up outside the samples
            on: list[float] = []
            off: list[float] = []
            for _ in range(options.count):
                on.append(call(True))
                off.append(call(False))
            sandboxed, plain = _summary(on), _summary(off)
            ratio = sandboxed["median_ms"] / plain["median_ms"]
            results[name] = {"sandboxed": sandboxed, "plain": plain, "ratio": ratio}
            extra = sandboxed["median_ms"] - plain["median_ms"]
            print(
                f"{name:9} sandboxed {sandboxed['median_ms']:6.2f} ms (p95 "
                f"{sandboxed['p95_ms']:.2f}), plain {plain['median_ms']:6.2f} ms (p95 "
                f"{plain['p95_ms']:.2f}): {ratio:.2f}x, +{extra:.2f} ms per command"
            )
    if options.json:
        options.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
