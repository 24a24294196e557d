"""What a command costs in a Docker workspace: `true` through DockerWorkspace.run vs
LocalWorkspace.run, and how long a new container takes to run its first command.

- round trip: `run("true")` N times each way (default 50, `--quick` 10), interleaved so load
  drifts hit all alike: the terminal tool's whole path (wrapper, state save and restore; the
  bubblewrap sandbox for local; for Docker the dispatcher in the container, and, as a third
  column, the exec path it falls back to: one `docker exec` per command, as before it).
- first command: from a DockerWorkspace with no container to the first `true` answered
  (create, start, the dispatcher's start, the command), M times (default 5, `--quick` 2);
  each container is removed after.
Uses the test image of tests/docker_images.py (built locally if missing). Needs no database.

    .venv/bin/python bench/docker_exec.py [--count 50] [--starts 5] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _common import percentile

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "canvas.settings")

TARGET_RATIO = 3.0


def _summary(samples: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(samples), "p95_ms": percentile(samples, 95)}


def _run_true(ws) -> float:
    started = time.perf_counter()
    result = ws.run("true", timeout=60)
    elapsed = (time.perf_counter() - started) * 1000
    assert result.exit_code == 0, result
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--json", type=Path, help="Write the results here.")
    parser.add_argument("--quick", action="store_true", help="10 round trips, 2 starts.")
    options = parser.parse_args()
    if options.quick:
        options.count, options.starts = 10, 2

    import django

    django.setup()
    from tests.docker_images import test_image
    from workspaces.docker import DockerWorkspace, docker_available
    from workspaces.local import LocalWorkspace

    if (reason := docker_available()) is not None:
        sys.exit(f"bench: {reason}")
    image = test_image()
    prefix = f"bench-{uuid.uuid4().hex[:8]}"

    with tempfile.TemporaryDirectory(prefix="bench-docker-") as scratch:
        base = Path(scratch)

        def docker_ws(name: str) -> DockerWorkspace:
            return DockerWorkspace(
                base / name / "root", base / name / "state",
                conversation_id=f"{prefix}-{name}", team_id=0, image=image,
            )  # fmt: skip

        local = LocalWorkspace(base / "local" / "root", base / "local" / "state")
        container = docker_ws("dispatch")
        by_exec = docker_ws("exec")
        by_exec._dispatcher = lambda: None  # type: ignore[method-assign]  # the fallback path
        try:
            # Warm up (and create) outside the samples.
            _run_true(local), _run_true(container), _run_true(by_exec)
            on_local: list[float] = []
            in_docker: list[float] = []
            with_exec: list[float] = []
            for _ in range(options.count):
                on_local.append(_run_true(local))
                in_docker.append(_run_true(container))
                with_exec.append(_run_true(by_exec))
        finally:
            container.close()
            by_exec.close()

        starts: list[float] = []
        for index in range(options.starts):
            fresh = docker_ws(f"start{index}")
            try:
                starts.append(_run_true(fresh))
            finally:
                fresh.close()

    local_s, docker_s, start_s = _summary(on_local), _summary(in_docker), _summary(starts)
    exec_s = _summary(with_exec)
    ratio = docker_s["median_ms"] / local_s["median_ms"]
    exec_ratio = exec_s["median_ms"] / local_s["median_ms"]
    verdict = "met" if ratio <= TARGET_RATIO else "MISSED"
    print(
        f"round trip  docker {docker_s['median_ms']:6.1f} ms (p95 {docker_s['p95_ms']:.1f}), "
        f"local {local_s['median_ms']:6.1f} ms (p95 {local_s['p95_ms']:.1f}): {ratio:.2f}x "
        f"(target <= {TARGET_RATIO:.0f}x: {verdict})"
    )
    print(
        f"exec path   docker {exec_s['median_ms']:6.1f} ms (p95 {exec_s['p95_ms']:.1f}): "
        f"{exec_ratio:.2f}x local (one exec per command, the fallback)"
    )
    print(
        f"first cmd   create-to-first-command {start_s['median_ms']:6.1f} ms median "
        f"(p95 {start_s['p95_ms']:.1f}) over {len(starts)} containers; "
        f"{start_s['median_ms'] / docker_s['median_ms']:.1f}x a warm round trip"
    )
    print(f"load        {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1/5/15 min)")
    if options.json:
        results = {
            "count": options.count,
            "round_trip": {"docker": docker_s, "local": local_s, "ratio": ratio},
            "exec_path": {"docker": exec_s, "ratio": exec_ratio},
            "first_command": start_s,
            "loadavg": os.getloadavg(),
        }
        options.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
