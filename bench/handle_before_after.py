"""Issue 23's price against the tree before it: the file editor in a 1,000-file folder, and a
whole fork of a conversation whose folder holds 1,000 files.

*before* runs from a git worktree of BEFORE (default 34cf807, the commit the issue was tried
against; made under /tmp and removed at the end), *now* from this tree, with the same
interpreter. Each round starts one child process per tree, the order alternating (before,
now, now, before, ...), so load drifts hit both alike. A child imports only its own tree's
code and uses its own database (`canvas_bench` for now, `canvas_bench_<commit>` for before,
each migrated by its tree), copies the folder (FILES small files, 100-4,000 bytes, in 30
folders two levels deep, and a few links, as in bench/fork_copy.py) into its scratch, warms up,
then times:
- view: `FileEditorTool` `view` of one of those files by a path relative to the saved cwd;
- create: a one-line new file in one of those folders (its undo history saved too);
- fork: `conversation_fork` of a conversation holding that folder and 20 events (the folder
  and the log copied, the new row written; no baseline, which both copy the same way).
Medians over every round's samples; target now / before <= 1.5x. Needs Postgres (DATABASE_URL
and REDIS_URL only say where the servers are, as for every benchmark).

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/handle_before_after.py \
        [--rounds 6] [--count 150] [--forks 4] [--before 34cf807] [--before-tree DIR] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent
BEFORE_COMMIT = "34cf807"
TARGET_RATIO = 1.5
MEASURES = ("view", "create", "fork")


# ---- the child: one tree's code, timed ---------------------------------------------------------


def child(tree: Path, template: Path, count: int, forks: int) -> dict[str, list[float]]:
    """Run in `tree` (its code first on sys.path, nothing of REPO's imported)."""
    sys.path.insert(0, str(tree))
    os.chdir(tree)
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from conversations import store
    from conversations.events import UserMessageEvent
    from conversations.models import Conversation
    from orchestration.fork import conversation_fork
    from orchestration.tools.base import ToolContext
    from orchestration.tools.file_editor import FileEditorArgs, FileEditorTool
    from teams.services import team_create
    from workspaces.local import LocalWorkspace

    for module in (conversation_fork, FileEditorTool.run, LocalWorkspace.read_text):
        assert Path(module.__code__.co_filename).is_relative_to(tree), module  # not REPO's

    scratch = Path(settings.CANVAS_WORKSPACES_ROOT)
    source = scratch / "source"
    shutil.copytree(template, source, symlinks=True)
    files = sorted(p.relative_to(source) for p in source.rglob("*.py"))
    ws = LocalWorkspace(source, Path(settings.CANVAS_STATE_ROOT) / "source")
    (ws.state_dir / "cwd").write_text(str(source / "pkg2"))  # as after `cd pkg2`
    ctx = ToolContext(conversation_id="bench", workspace=ws)
    tool = FileEditorTool()

    user = get_user_model().objects.create_user(f"bench-{uuid.uuid4().hex[:12]}")
    team = team_create(user=user, name=user.username)
    conversation = Conversation.objects.create(
        owner=user, team=team, model="scripted", workspace_path=str(source)
    )
    store.append(conversation.pk, [UserMessageEvent(text=f"message {i}") for i in range(20)])

    def timed(call: Any) -> float:
        started = time.perf_counter()
        call()
        return (time.perf_counter() - started) * 1000

    def edit(args: Any) -> None:
        result = tool.run(args, ctx)
        assert not result.is_error, result.content

    samples: dict[str, list[float]] = {name: [] for name in MEASURES}
    # Paths as an agent writes them after `cd pkg2`: mod3/file17.py.
    in_pkg2 = [str(Path(*f.parts[1:])) for f in files if f.parts[0] == "pkg2"]
    for i in range(count + 5):  # the first 5 of each warm up
        view = FileEditorArgs(command="view", path=in_pkg2[i % len(in_pkg2)])
        folder = f"mod{i % 5}"
        create = FileEditorArgs(command="create", path=f"{folder}/new{i}.txt", file_text="x\n")
        for name, args in (("view", view), ("create", create)):
            took = timed(lambda args=args: edit(args))
            if i >= 5:
                samples[name].append(took)
    for i in range(forks + 1):  # the first warms up
        made: list[Any] = []
        took = timed(lambda made=made: made.append(conversation_fork(source=conversation, by=user)))
        if i:
            samples["fork"].append(took)
        shutil.rmtree(made[0].workspace_path)
    return samples


# ---- the parent: worktree, databases, rounds ---------------------------------------------------


def make_tree(root: Path, files: int) -> None:
    """bench/fork_copy.py's layout (30 folders two levels deep, 100-4,000 bytes a file, a few
    links), in Python text the editor can view."""
    rng = random.Random(23)
    folders = [root / f"pkg{i}" / f"mod{j}" for i in range(6) for j in range(5)]
    for folder in folders:
        folder.mkdir(parents=True)
    for n in range(files):
        lines = "".join(f"value_{n}_{k} = {rng.random()!r}\n" for k in range(rng.randint(3, 130)))
        (rng.choice(folders) / f"file{n}.py").write_text(lines)
    for i in range(5):
        (root / f"link{i}").symlink_to(f"pkg{i}/mod0")


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.strip()


def _database(url: str, tree: Path, env: dict[str, str]) -> None:
    """Create the database if missing and migrate it with `tree`'s own migrations."""
    from bench._common import _ensure_database

    _ensure_database(url)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=tree, env={**env, "DATABASE_URL": url, "PYTHONPATH": str(tree)}, check=True,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--count", type=int, default=150, help="views and creates per round")
    parser.add_argument("--forks", type=int, default=4, help="forks per round")
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--before", default=BEFORE_COMMIT)
    parser.add_argument("--before-tree", type=Path, help="an existing worktree of --before")
    parser.add_argument("--quick", action="store_true", help="2 rounds of 30 and 2")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", nargs=2, metavar=("TREE", "TEMPLATE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        samples = child(Path(args.child[0]), Path(args.child[1]), args.count, args.forks)
        print(json.dumps(samples))
        return
    if args.quick:
        args.rounds, args.count, args.forks = 2, 30, 2

    sys.path.insert(0, str(REPO))
    from bench._common import _bench_database_url, _bench_redis_url

    commit = _git("rev-parse", "--short", args.before)
    head = _git("rev-parse", "--short", "HEAD")
    scratch = Path(tempfile.mkdtemp(prefix="bench-handle-"))
    tree = args.before_tree
    made_tree = tree is None
    try:
        if tree is None:
            tree = scratch / f"before-{commit}"
            _git("worktree", "add", "--detach", str(tree), commit)
        now_url = _bench_database_url()
        before_url = now_url.rsplit("/", 1)[0] + f"/canvas_bench_{commit}"
        env = {
            **os.environ, "DJANGO_SETTINGS_MODULE": "canvas.settings", "DEBUG": "false",
            "SECRET_KEY": os.environ.get("SECRET_KEY") or "bench-only-not-a-secret",
            "REDIS_URL": _bench_redis_url(), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LOG_LEVEL": "WARNING",
        }  # fmt: skip
        ways = {"before": (tree, before_url), "now": (REPO, now_url)}
        for tree_of, url in ways.values():
            _database(url, tree_of, env)
        template = scratch / "template"
        make_tree(template, args.files)
        samples: dict[str, dict[str, list[float]]] = {w: {m: [] for m in MEASURES} for w in ways}
        for round_ in range(args.rounds):
            order = list(ways) if round_ % 2 == 0 else list(reversed(ways))
            for way in order:
                tree_of, url = ways[way]
                run = scratch / f"{way}-{round_}"
                child_env = {
                    **env, "DATABASE_URL": url, "PYTHONPATH": str(tree_of),
                    "CANVAS_WORKSPACES_ROOT": str(run / "workspaces"),
                    "CANVAS_STATE_ROOT": str(run / "state"),
                }  # fmt: skip
                done = subprocess.run(
                    [sys.executable, str(HERE), "--count", str(args.count), "--forks",
                     str(args.forks), "--child", str(tree_of), str(template)],
                    cwd=tree_of, env=child_env, capture_output=True, text=True,
                )  # fmt: skip
                if done.returncode:
                    sys.exit(f"the {way} child failed:\n{done.stderr[-4000:]}")
                for name, values in json.loads(done.stdout.strip().splitlines()[-1]).items():
                    samples[way][name].extend(values)
                shutil.rmtree(run, ignore_errors=True)
        print(f"before = {commit} (worktree), now = {head}; {args.files} files; "
              f"{args.rounds} rounds, interleaved")  # fmt: skip
        results: dict[str, Any] = {"before": commit, "now": head, "rounds": args.rounds}
        for name in MEASURES:
            now = statistics.median(samples["now"][name])
            before = statistics.median(samples["before"][name])
            results[name] = {"now_ms": now, "before_ms": before, "ratio": now / before,
                             "n": len(samples["now"][name])}  # fmt: skip
            verdict = "ok" if now / before <= TARGET_RATIO else f"over {TARGET_RATIO}x"
            print(f"  {name:6s} before {before:8.3f} ms  now {now:8.3f} ms  "
                  f"{now / before:.2f}x  (N={len(samples['now'][name])}) {verdict}")  # fmt: skip
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
    finally:
        if made_tree and tree is not None and tree.exists():
            _git("worktree", "remove", "--force", str(tree))
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
