"""Filling a new workspace from a git repository, once, before its baseline is taken.

Three kinds of `GitSource.repo`:
- the name of a repository the site configures (CANVAS_GIT_REPOS, `{"name": "/path"}`): the
  workspace becomes a `git worktree add --detach` of it at the ref. Its `.git` is a file pointing
  into that repository, which the sandbox does not mount: the agent's own git commands in such
  a workspace fail, while its files, Changes and archive work as usual. `git worktree prune` in
  the configured repository forgets the worktrees of deleted conversations;
- an https (or http) URL whose host passes the SSRF guard (common.netguard), cloned. The host
  is resolved and checked just before; git then resolves it again itself, so a name that
  changes its answer in between is not caught (sites that need that closed list their
  repositories in CANVAS_GIT_REPOS and put the guard's networks off limits);
- a local path under one of the site's CANVAS_GIT_LOCAL_ROOTS, cloned. Other local paths are
  refused: the worker's disk holds other teams' workspaces and the project's own settings.

git runs as workspaces.baseline runs it: no system or global config (HOME is an empty
directory), no hooks, no terminal prompts, only the file, http and https transports, and a
timeout. The ref is checked out after the clone (a branch, a tag or a commit; a branch becomes
a local branch tracking the remote one, a tag or commit a detached HEAD).

Crash safety: a marker in the state directory says a fill began; a runner that finds it
without the "done" marker empties the root (what is there is a cut-short clone of ours) and
starts again. A root that holds files we did not put there is refused, never emptied.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from common.netguard import BlockedURL, UnresolvableHost, check_url, site_allowed_networks
from workspaces.spec import GitSource

_GIT_TIMEOUT = 600.0
_PATH = "/usr/local/bin:/usr/bin:/bin"
_STARTED = "source.started"
_DONE = "source.json"
_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.autocrlf=false",
    "core.symlinks=true",
    "advice.detachedHead=false",
    "submodule.recurse=false",
    "protocol.allow=never",  # then only these (ext::, fd:: and ssh's command hooks stay off)
    "protocol.file.allow=always",
    "protocol.https.allow=always",
    "protocol.http.allow=always",
)


class SourceError(Exception):
    """The source cannot fill the workspace; the message is for people (no host paths of the
    worker beyond what they gave)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def source_check(
    source: GitSource, *, named: Mapping[str, str], local_roots: list[str] | tuple[str, ...]
) -> None:
    """Refuse a source this site will not clone (SourceError). Cheap: the API calls it when a
    conversation is created; the runner again, resolving the URL's host, before cloning."""
    _locate(source, named=named, local_roots=local_roots, resolve=False)


def source_fill(
    root: Path,
    state_dir: Path,
    source: GitSource | None,
    *,
    named: Mapping[str, str],
    local_roots: list[str] | tuple[str, ...],
) -> bool:
    """Fill the empty workspace `root` from `source` unless that was done; True when this call
    filled it. Call before the workspace's baseline is taken. SourceError when it cannot."""
    done, started = state_dir / _DONE, state_dir / _STARTED
    if source is None or done.exists():
        return False
    if started.exists():
        _empty(root)  # a fill of ours was cut short
    elif root.exists() and any(root.iterdir()):
        raise SourceError("the workspace folder is not empty: a git source needs an empty one.")
    kind, where = _locate(source, named=named, local_roots=local_roots)
    root.mkdir(parents=True, exist_ok=True)
    started.write_text(source.model_dump_json())
    git = _Git(state_dir)
    if kind == "worktree":
        git.run("-C", where, "worktree", "add", "--detach", "--force", "--quiet", "--", str(root),
                source.ref or "HEAD", what=f"checking out {source.ref or 'HEAD'} of {source.repo}")  # fmt: skip
    else:
        git.run("clone", "--quiet", "--no-checkout", "--", where, str(root),
                what=f"cloning {source.repo}")  # fmt: skip
        git.run("-C", str(root), "checkout", "--quiet", source.ref or "HEAD", "--",
                what=f"checking out {source.ref or 'HEAD'}")  # fmt: skip
    commit = git.run("-C", str(root), "rev-parse", "HEAD", what="reading the commit").strip()
    done.write_text(json.dumps({**source.model_dump(mode="json"), "commit": commit}))
    started.unlink(missing_ok=True)
    return True


def _locate(
    source: GitSource,
    *,
    named: Mapping[str, str],
    local_roots: list[str] | tuple[str, ...],
    resolve: bool = True,
) -> tuple[str, str]:
    """("worktree", repository path) for a named repository, else ("clone", what to clone)."""
    if source.repo in named:
        return "worktree", str(named[source.repo])
    parts = urlsplit(source.repo)
    if parts.scheme in ("http", "https"):
        try:
            check_url(source.repo, allowed_networks=site_allowed_networks(), resolve=resolve)
        except (BlockedURL, UnresolvableHost) as exc:
            raise SourceError(f"repo {source.repo!r} is refused: {exc}") from None
        return "clone", source.repo
    if parts.scheme == "file":
        path = parts.path
    elif parts.scheme or (":" in source.repo and not source.repo.startswith("/")):
        raise SourceError(
            f"repo {source.repo!r}: only https URLs, a repository name the site configures "
            f"({', '.join(sorted(named)) or 'none here'}) or a local path the site allows can be "
            "cloned."
        )
    else:
        path = source.repo
    real = os.path.realpath(path)
    allowed = [os.path.realpath(r) for r in local_roots]
    if not os.path.isabs(path) or not any(
        real == r or real.startswith(r.rstrip("/") + "/") for r in allowed
    ):
        raise SourceError(
            f"repo {source.repo!r}: local repositories must lie under a folder the site allows "
            "(CANVAS_GIT_LOCAL_ROOTS)."
        )
    if not os.path.isdir(real):
        raise SourceError(f"repo {source.repo!r} is not a folder on the worker.")
    return "clone", real


def _empty(root: Path) -> None:
    if not root.is_dir():
        return
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


class _Git:
    """git with nothing from the environment or the user's configuration."""

    def __init__(self, state_dir: Path) -> None:
        home = state_dir / "source.home"  # empty: no ~/.gitconfig, no ~/.ssh
        home.mkdir(parents=True, exist_ok=True)
        self.env = {
            "PATH": _PATH,
            "HOME": str(home),
            "LANG": "C",
            "LC_ALL": "C",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": "/bin/false",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_AUTHOR_NAME": "canvas",
            "GIT_AUTHOR_EMAIL": "canvas@localhost",
            "GIT_COMMITTER_NAME": "canvas",
            "GIT_COMMITTER_EMAIL": "canvas@localhost",
        }

    def run(self, *args: str, what: str) -> str:
        argv = ["git"]
        for setting in _CONFIG:
            argv += ["-c", setting]
        try:
            proc = subprocess.run(
                [*argv, *args], env=self.env, stdin=subprocess.DEVNULL, capture_output=True,
                timeout=_GIT_TIMEOUT, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise SourceError(f"{what} took longer than {_GIT_TIMEOUT:.0f} s.") from None
        if proc.returncode != 0:
            detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            reason = detail[-1] if detail else f"git exited with {proc.returncode}"
            raise SourceError(f"{what} failed: {reason.removeprefix('fatal: ')}")
        return proc.stdout.decode("utf-8", "replace")
