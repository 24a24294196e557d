"""What opening workspace files by handle costs the file editor: the tool now vs before it.

The file editor's whole path (`FileEditorTool.run`: the path resolved against the saved cwd,
the file opened, read or written, the undo history saved), N times each (default 2,000):
- view: a 500-line Python file, by a path relative to the terminal's directory;
- create: a small new file (one per call).
Both ways interleaved, so load drifts hit both alike: *now* is this tree's tool and
LocalWorkspace (workspaces.fs: component by component from the root's descriptor, links
refused, writes through a temporary file and a rename); *before* is the same two modules as
they were at BEFORE_COMMIT (realpath, then open by name), loaded from `git show` into
modules of their own. Each way has its own workspace. Needs no database or Redis.

    .venv/bin/python bench/file_editor.py [--count 2000] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "canvas.settings")

BEFORE_COMMIT = "34cf807"
"""main before issue 23's file layer (the commit the issue was tried against)."""
TARGET_RATIO = 1.5


def _old_module(name: str, path: str) -> ModuleType:
    """`path` as it was at BEFORE_COMMIT, imported as the module `name`."""
    source = subprocess.run(
        ["git", "show", f"{BEFORE_COMMIT}:{path}"], cwd=REPO, check=True, capture_output=True
    ).stdout
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    exec(compile(source, f"{BEFORE_COMMIT}:{path}", "exec"), module.__dict__)  # noqa: S102
    return module


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": statistics.median(ordered),
        "p95_ms": ordered[max(0, round(0.95 * len(ordered)) - 1)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--json", type=Path, help="Write the results here.")
    parser.add_argument("--quick", action="store_true", help="200 of each, for a smoke run.")
    options = parser.parse_args()
    if options.quick:
        options.count = 200

    import django

    django.setup()
    from orchestration.tools import file_editor as new_editor
    from orchestration.tools.base import ToolContext
    from workspaces import local as new_local

    old_local = _old_module("bench_before_local", "workspaces/local.py")
    old_editor = _old_module("bench_before_file_editor", "orchestration/tools/file_editor.py")
    ways = {"now": (new_local, new_editor), "before": (old_local, old_editor)}

    scratch = Path(tempfile.mkdtemp(prefix="bench-file-editor-"))
    try:
        source = "".join(f"def function_{i}(x):\n    return x + {i}\n\n" for i in range(167))
        source = "\n".join(source.splitlines()[:500]) + "\n"
        runs: dict[str, Any] = {}
        for name, (local, editor) in ways.items():
            ws = local.LocalWorkspace(scratch / name / "root", scratch / name / "state")
            (ws.root / "src" / "pkg").mkdir(parents=True)
            (ws.root / "src" / "pkg" / "big.py").write_text(source)
            (ws.state_dir / "cwd").write_text(str(ws.root / "src"))  # as after `cd src`
            ctx = ToolContext(conversation_id="bench", workspace=ws)
            runs[name] = (editor.FileEditorTool(), editor.FileEditorArgs, ctx)
        samples: dict[str, dict[str, list[float]]] = {n: {"view": [], "create": []} for n in ways}
        for i in range(options.count):
            order = list(ways) if i % 2 == 0 else list(reversed(ways))
            for name in order:
                tool, args_model, ctx = runs[name]
                for command, args in (
                    ("view", args_model(command="view", path="pkg/big.py")),
                    ("create", args_model(command="create", path=f"new/f{i}.txt", file_text="x\n")),
                ):
                    started = time.perf_counter()
                    result = tool.run(args, ctx)
                    samples[name][command].append((time.perf_counter() - started) * 1000)
                    assert not result.is_error, result.content
        results: dict[str, Any] = {"count": options.count, "before": BEFORE_COMMIT}
        for command in ("view", "create"):
            now, before = _summary(samples["now"][command]), _summary(samples["before"][command])
            ratio = now["median_ms"] / before["median_ms"]
            results[command] = {"now": now, "before": before, "ratio": ratio}
            print(
                f"{command:>6} (N={options.count}): now {now['median_ms']:.3f} ms "
                f"(p95 {now['p95_ms']:.3f}), before {before['median_ms']:.3f} ms "
                f"(p95 {before['p95_ms']:.3f}): {ratio:.2f}x "
                f"{'ok' if ratio <= TARGET_RATIO else f'over the {TARGET_RATIO}x target'}"
            )
        if options.json:
            options.json.write_text(json.dumps(results, indent=2))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
