"""The workspace spec's shape, and filling a workspace from a git source (a real git repository
made in tmp_path): a branch, a tag, a commit, a configured repository's worktree, refusals."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from workspaces.sources import SourceError, source_check, source_fill
from workspaces.spec import GitSource, WorkspaceSpec, spec_of

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
    "PATH": "/usr/bin:/bin", "HOME": "/nonexistent",
}  # fmt: skip


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(repo), *args], env=GIT_ENV, check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


def make_repo(where: Path) -> dict[str, str]:
    """main: a.txt (tag v1), then b.txt; branch feature adds c.txt. Returns the commits."""
    where.mkdir(parents=True)
    git(where, "init", "-q", "-b", "main")
    (where / "a.txt").write_text("one\n")
    git(where, "add", "a.txt")
    git(where, "commit", "-qm", "one")
    git(where, "tag", "v1")
    first = git(where, "rev-parse", "HEAD")
    (where / "b.txt").write_text("two\n")
    git(where, "add", "b.txt")
    git(where, "commit", "-qm", "two")
    main = git(where, "rev-parse", "HEAD")
    git(where, "checkout", "-qb", "feature")
    (where / "c.txt").write_text("three\n")
    git(where, "add", "c.txt")
    git(where, "commit", "-qm", "three")
    feature = git(where, "rev-parse", "HEAD")
    git(where, "checkout", "-q", "main")
    return {"first": first, "main": main, "feature": feature}


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "repos" / "project"
    return path, make_repo(path)


def fill(tmp_path: Path, source: GitSource, **options) -> tuple[Path, Path]:
    root, state = tmp_path / "root", tmp_path / "state"
    root.mkdir(parents=True, exist_ok=True)
    state.mkdir(parents=True, exist_ok=True)
    options.setdefault("named", {})
    options.setdefault("local_roots", [str(tmp_path / "repos")])
    source_fill(root, state, source, **options)
    return root, state


def files(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name != ".git")


# -- the spec --------------------------------------------------------------------------------


def test_the_spec_defaults_to_an_empty_local_workspace():
    assert spec_of({}) == WorkspaceSpec(kind="local", source=None, image=None)
    assert spec_of(None).kind == "local"
    spec = WorkspaceSpec(kind="docker", source={"repo": "https://example.com/r.git", "ref": "v1"},
                         image="canvas-test/busybox:1")  # fmt: skip
    assert spec_of(spec.as_json()) == spec


@pytest.mark.parametrize(
    "data",
    [
        {"kind": "vm"},
        {"kind": "local", "image": "debian:12"},  # an image is for docker only
        {"kind": "docker", "image": "-rm"},
        {"kind": "docker", "image": "a b"},
        {"source": {"repo": ""}},
        {"source": {"repo": "--upload-pack=touch /tmp/x"}},
        {"source": {"repo": "r", "ref": "--orphan"}},
        {"source": {"repo": "r", "ref": "a..b"}},
        {"source": {"repo": "r", "ref": "a b"}},
        {"source": {"repo": "r\nx"}},
        {"source": {"repo": "r", "extra": 1}},
        {"unknown": True},
    ],
)
def test_the_spec_refuses_what_is_not_a_workspace(data):
    with pytest.raises(ValidationError):
        WorkspaceSpec.model_validate(data)


# -- sources -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "expected", "commit"),
    [
        (None, ["a.txt", "b.txt"], "main"),
        ("main", ["a.txt", "b.txt"], "main"),
        ("feature", ["a.txt", "b.txt", "c.txt"], "feature"),
        ("v1", ["a.txt"], "first"),
    ],
)
def test_a_clone_at_a_branch_or_tag(tmp_path, repo, ref, expected, commit):
    path, commits = repo
    root, state = fill(tmp_path, GitSource(repo=str(path), ref=ref))
    assert files(root) == expected
    assert git(root, "rev-parse", "HEAD") == commits[commit]
    assert commits[commit] in (state / "source.json").read_text()


def test_a_clone_at_a_commit_and_only_once(tmp_path, repo):
    path, commits = repo
    source = GitSource(repo=f"file://{path}", ref=commits["first"])
    root, state = fill(tmp_path, source)
    assert files(root) == ["a.txt"]
    (root / "a.txt").write_text("changed by the agent\n")
    assert source_fill(root, state, source, named={}, local_roots=[str(tmp_path)]) is False
    assert (root / "a.txt").read_text() == "changed by the agent\n"


def test_a_configured_repository_becomes_a_worktree(tmp_path, repo):
    path, commits = repo
    root, _ = fill(tmp_path, GitSource(repo="project", ref="feature"),
                   named={"project": str(path)}, local_roots=[])  # fmt: skip
    assert files(root) == ["a.txt", "b.txt", "c.txt"]
    assert (root / ".git").is_file()  # a worktree's pointer into the configured repository
    assert str(root) in git(path, "worktree", "list")


def test_a_fill_cut_short_starts_again(tmp_path, repo):
    path, _ = repo
    root, state = tmp_path / "root", tmp_path / "state"
    root.mkdir()
    state.mkdir()
    (state / "source.started").write_text("{}")
    (root / "partial").write_text("half a clone")
    source_fill(root, state, GitSource(repo=str(path)), named={}, local_roots=[str(path)])
    assert files(root) == ["a.txt", "b.txt"]
    assert not (state / "source.started").exists()


@pytest.mark.parametrize(
    ("source", "says"),
    [
        (GitSource(repo="/etc"), "CANVAS_GIT_LOCAL_ROOTS"),
        (GitSource(repo="relative/path"), "CANVAS_GIT_LOCAL_ROOTS"),
        (GitSource(repo="ext::sh -c touch% /tmp/pwned"), "only https URLs"),
        (GitSource(repo="git@example.com:x/y.git"), "only https URLs"),
        (GitSource(repo="http://127.0.0.1:5432/x.git"), "refused"),
        (GitSource(repo="https://169.254.169.254/x.git"), "metadata"),
    ],
)
def test_sources_the_site_does_not_allow_are_refused(tmp_path, source, says):
    with pytest.raises(SourceError, match=says):
        source_check(source, named={}, local_roots=[str(tmp_path)])


def test_a_bad_ref_or_repo_is_a_clear_error(tmp_path, repo):
    path, _ = repo
    with pytest.raises(SourceError, match="checking out no-such-branch failed"):
        fill(tmp_path, GitSource(repo=str(path), ref="no-such-branch"))
    with pytest.raises(SourceError, match="cloning .* failed"):
        fill(tmp_path / "other", GitSource(repo=str(tmp_path / "repos")),  # not a repository
             local_roots=[str(tmp_path)])  # fmt: skip


def test_a_folder_holding_files_is_never_emptied(tmp_path, repo):
    path, _ = repo
    root = tmp_path / "root"
    root.mkdir()
    (root / "mine.txt").write_text("keep")
    with pytest.raises(SourceError, match="not empty"):
        fill(tmp_path, GitSource(repo=str(path)))
    assert (root / "mine.txt").read_text() == "keep"
