"""What copying a workspace by handle costs a fork: workspaces.fs_tree vs shutil.copytree.

A fork copies the source's folder in the web request. *now* is `tree_size` + `copy_tree`
(workspaces.fs_tree: folders entered by descriptor with O_NOFOLLOW, files read from checked
descriptors, copy_file_range, modes and times kept); *before* is what orchestration/fork.py did
at 34cf807: an os.walk sizing pass, then `shutil.copytree(symlinks=True)` with an ignore
callback that lstat'ed every name. The folder: FILES small files (100-4,000 bytes) spread over
~30 folders two levels deep, plus a few links. Runs interleaved (before, now, before, ...) so
load drifts hit both alike; medians of RUNS each. Needs no database or Redis.

    .venv/bin/python bench/fork_copy.py [--files 1000] [--runs 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import stat
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from workspaces.fs_tree import copy_tree, tree_size  # noqa: E402

TARGET_RATIO = 1.5
LIMIT = 1 << 30


def make_tree(root: Path, files: int) -> None:
    rng = random.Random(23)
    folders = [root / f"pkg{i}" / f"mod{j}" for i in range(6) for j in range(5)]
    for folder in folders:
        folder.mkdir(parents=True)
    for n in range(files):
        (rng.choice(folders) / f"file{n}.py").write_bytes(os.urandom(rng.randint(100, 4000)))
    for i in range(5):
        (root / f"link{i}").symlink_to(f"pkg{i}/mod0")


def before(src: Path, dst: Path) -> None:
    """orchestration/fork.py at 34cf807: _tree_bytes, then copytree with the specials filter."""
    total = 0
    for folder, _dirs, names in os.walk(src, followlinks=False):
        for name in names:
            total += os.lstat(os.path.join(folder, name)).st_size

    def ignore(folder: str, names: list[str]) -> list[str]:
        return [
            n for n in names
            if not stat.S_ISREG(m := os.lstat(os.path.join(folder, n)).st_mode)
            and not stat.S_ISDIR(m) and not stat.S_ISLNK(m)
        ]  # fmt: skip

    shutil.copytree(src, dst, symlinks=True, ignore=ignore, dirs_exist_ok=True)


def now(src: Path, dst: Path) -> None:
    tree_size(src, LIMIT)
    copy_tree(src, dst, limit_bytes=LIMIT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fork-copy-") as scratch:
        src = Path(scratch, "src")
        make_tree(src, args.files)
        times: dict[str, list[float]] = {"before": [], "now": []}
        for run in range(args.runs):
            for name, copy in (("before", before), ("now", now)):
                dst = Path(scratch, f"{name}-{run}")
                dst.mkdir()
                started = time.perf_counter()
                copy(src, dst)
                times[name].append((time.perf_counter() - started) * 1000)
                shutil.rmtree(dst)
    medians = {name: statistics.median(values) for name, values in times.items()}
    ratio = medians["now"] / medians["before"]
    print(f"copy of {args.files} files in 30 folders, median of {args.runs} runs, interleaved")
    for name, value in medians.items():
        spread = f"{min(times[name]):.1f}-{max(times[name]):.1f}"
        print(f"  {name:6s} {value:7.1f} ms  (range {spread})")
    print(f"  now / before = {ratio:.2f}x (target <= {TARGET_RATIO}x)")
    if args.json:
        args.json.write_text(json.dumps({"medians_ms": medians, "ratio": ratio, "runs": times}))
    sys.exit(0 if ratio <= TARGET_RATIO else 1)


if __name__ == "__main__":
    main()
