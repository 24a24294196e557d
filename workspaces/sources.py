"""Filling a new workspace from a git repository, once, before its baseline is taken.

Three kinds of `GitSource.repo`:
- the name of a repository the site configures (CANVAS_GIT_REPOS, `{"name": "/path"}`): the
  workspace becomes a `git worktree add --detach` of it at the ref. Its `.git` is a file pointing
  into that repository, which the sandbox does not mount: the agent's own git commands in such
  a workspace fail, while its files, Changes and archive work as usual. `git worktree prune` in
  the configured repository forgets the worktrees of deleted conversations;
- an https URL whose host passes the SSRF guard (common.netguard), cloned. Plain http only
  where the site allows it (CANVAS_GIT_ALLOW_HTTP): anyone on the path could change what is
  cloned. The host is resolved and every address checked just before the clone, and git is
  pinned to exactly those addresses (`http.curloptResolve`, git 2.37 or later), so a name
  that answers differently the second time (DNS rebinding) cannot lead git elsewhere. git
  follows no redirect (`http.followRedirects=false`): a redirect could name any host, which
  the pin and the check would not cover; a server that redirects is refused, saying so;
- a local path under one of the site's CANVAS_GIT_LOCAL_ROOTS, cloned. Other local paths are
  refused: the worker's disk holds other teams' workspaces and the project's own settings.

git runs as workspaces.baseline runs it: no system or global config (HOME is an empty
directory), no proxy or other variable of the worker's, no hooks, no terminal prompts, only the
file and https transports (http where allowed), argv lists only, and a timeout. The ref is checked out after the clone (a branch, a tag or a commit; a branch becomes
a local branch tracking the remote one, a tag or commit a detached HEAD).

Crash safety: a marker in the state directory says a fill began; a runner that finds it
without the "done" marker empties the root (what is there is a cut-short clone of ours) and
starts again. A root that holds files we did not put there is refused, never emptied.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from urllib.parse import urlsplit

from common.netguard import (
    BlockedURL,
    Target,
    UnresolvableHost,
    check_url,
    resolve_url,
    site_allowed_networks,
)
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
)
_PINNING_GIT = (2, 37)
"""The first git that passes `http.curloptResolve` to curl; older ones ignore it silently."""
_REDIRECTED = re.compile(r"returned error: 30[12378]\b")
HTTP_SETTING = "CANVAS_GIT_ALLOW_HTTP"


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
    place = _locate(source, named=named, local_roots=local_roots)
    root.mkdir(parents=True, exist_ok=True)
    started.write_text(source.model_dump_json())
    git = _Git(state_dir)
    if place.kind == "worktree":
        git.run("-C", place.where, "worktree", "add", "--detach", "--force", "--quiet", "--",
                str(root), source.ref or "HEAD",
                what=f"checking out {source.ref or 'HEAD'} of {source.repo}")  # fmt: skip
    else:
        git.run("clone", "--quiet", "--no-checkout", "--", place.where, str(root),
                what=f"cloning {source.repo}", config=clone_config(place.target))  # fmt: skip
        git.run("-C", str(root), "checkout", "--quiet", source.ref or "HEAD", "--",
                what=f"checking out {source.ref or 'HEAD'}")  # fmt: skip
    commit = git.run("-C", str(root), "rev-parse", "HEAD", what="reading the commit").strip()
    done.write_text(json.dumps({**source.model_dump(mode="json"), "commit": commit}))
    started.unlink(missing_ok=True)
    return True


@dataclass(frozen=True, slots=True)
class _Place:
    kind: str
    """"worktree" (of a named repository) or "clone"."""
    where: str
    """The repository's path, or what to clone."""
    target: Target | None = None
    """For a URL: its checked addresses, which git must connect to."""


def http_allowed() -> bool:
    """Whether the site lets plain http git URLs through (read on every call)."""
    from django.conf import settings

    return bool(getattr(settings, HTTP_SETTING, False))


def clone_config(target: Target | None) -> tuple[str, ...]:
    """The `-c` settings a clone runs with beyond _CONFIG: http only where the site allows it;
    for a URL, no redirects and the host pinned to the addresses the guard checked."""
    config = (f"protocol.http.allow={'always' if http_allowed() else 'never'}",)
    if target is None:
        return config
    config += ("http.followRedirects=false",)
    shown = [f"[{a}]" if ":" in a else a for a in target.addresses]
    return (*config, f"http.curloptResolve={target.host}:{target.port}:{','.join(shown)}")


def _check_url(url: str, *, scheme: str, resolve: bool) -> Target | None:
    if scheme == "http" and not http_allowed():
        raise SourceError(
            f"repo {url!r}: plain http is refused (anyone on the way could change what is "
            f"cloned): use an https URL. A site administrator can allow http with {HTTP_SETTING}."
        )
    try:
        if not resolve:
            check_url(url, allowed_networks=site_allowed_networks(), resolve=False)
            return None
        target = resolve_url(url, allowed_networks=site_allowed_networks())
    except (BlockedURL, UnresolvableHost) as exc:
        raise SourceError(f"repo {url!r} is refused: {exc}") from None
    if _git_version() < _PINNING_GIT:
        raise SourceError(
            f"repo {url!r}: cloning from a URL needs git {'.'.join(map(str, _PINNING_GIT))} or "
            "later on the worker (to hold git to the address that was checked)."
        )
    return target


def _locate(
    source: GitSource,
    *,
    named: Mapping[str, str],
    local_roots: list[str] | tuple[str, ...],
    resolve: bool = True,
) -> _Place:
    """Where the source comes from; SourceError when this site will not clone it. With
    `resolve`, a URL's host is resolved and the place carries the checked addresses."""
    if source.repo in named:
        return _Place("worktree", str(named[source.repo]))
    parts = urlsplit(source.repo)
    scheme = parts.scheme.lower()
    if scheme in ("http", "https"):
        target = _check_url(source.repo, scheme=scheme, resolve=resolve)
        return _Place("clone", source.repo, target)
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
    return _Place("clone", real)


@cache
def _git_version() -> tuple[int, int]:
    try:
        out = subprocess.run(
            ["git", "--version"], env={"PATH": _PATH}, capture_output=True, text=True,
            timeout=30, check=False,
        ).stdout  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return (0, 0)
    found = re.search(r"(\d+)\.(\d+)", out)
    return (int(found[1]), int(found[2])) if found else (0, 0)


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

    def run(self, *args: str, what: str, config: Sequence[str] = ()) -> str:
        argv = ["git"]
        for setting in (*_CONFIG, *config):
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
            if _REDIRECTED.search(reason):
                reason = (
                    "the server answered with a redirect, which is not followed (it could "
                    "lead to another host): give the repository's own URL"
                )
            raise SourceError(f"{what} failed: {reason.removeprefix('fatal: ')}")
        return proc.stdout.decode("utf-8", "replace")
