"""The file tools on a Docker workspace: the agent sees its files at /workspace, and every way
out (`..`, another absolute path, a link made inside the container, a NUL byte) is refused with
a clear error, as in a local workspace: a link is never followed on the host."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestration.tools.base import ToolContext, ToolResult
from orchestration.tools.file_editor import FileEditorArgs, FileEditorTool
from tests.workspaces.test_docker import engine, make  # noqa: F401 (the engine fixture)
from workspaces.docker import DockerWorkspace

pytestmark = pytest.mark.docker


@pytest.fixture
def ws(engine, tmp_path: Path) -> Iterator[DockerWorkspace]:  # noqa: F811
    workspace = make(tmp_path)
    yield workspace
    workspace.close()


def edit(ws: DockerWorkspace, command: str, path: str, **kwargs: Any) -> ToolResult:
    args = FileEditorArgs(command=command, path=path, **kwargs)
    return FileEditorTool().run(args, ToolContext(conversation_id="c1", workspace=ws))


def test_the_agents_own_paths_work(ws: DockerWorkspace) -> None:
    ws.run("mkdir -p pkg && cd pkg && echo 'x = 1' > mod.py", timeout=30)
    for path in ("/workspace/pkg/mod.py", "mod.py", "../pkg/mod.py"):
        result = edit(ws, "view", path)
        assert not result.is_error and "x = 1" in result.content, (path, result.content)
    created = edit(ws, "create", "/workspace/new.txt", file_text="made\n")
    assert not created.is_error, created.content
    assert ws.run("cat /workspace/new.txt", timeout=30).output == "made\n"


@pytest.mark.parametrize("command", ["view", "create", "str_replace"])
@pytest.mark.parametrize(
    "path", ["../outside.txt", "/etc/passwd", "/workspace/../etc/passwd", "link/passwd", "a\0b"]
)
def test_every_way_out_is_refused(ws: DockerWorkspace, tmp_path: Path, command, path) -> None:
    ws.run("ln -s /etc link", timeout=30)  # made inside the container: /etc of the container
    result = edit(ws, command, path, file_text="x", old_str="root", new_str="y")
    assert result.is_error
    assert any(
        why in result.content
        for why in ("outside the workspace", "not a valid path", "is a symbolic link")
    ), result.content
    assert str(ws.root) not in result.content  # the agent is told its own paths, not the host's
    assert not (tmp_path / "outside.txt").exists()


def test_the_container_cwd_is_used_and_links_are_refused(ws: DockerWorkspace) -> None:
    ws.run("mkdir -p real/sub && ln -s real alias && cd alias/sub && echo hi > f.txt", timeout=30)
    assert ws.current_dir() == ws.root / "real" / "sub"  # the folder, never the link
    result = edit(ws, "view", "f.txt")
    assert not result.is_error and "hi" in result.content, result.content
    refused = edit(ws, "view", "/workspace/alias/sub/f.txt")
    assert refused.is_error and "'alias' is a symbolic link" in refused.content
    assert str(ws.root) not in refused.content


def test_file_tools_map_container_paths_without_an_engine(tmp_path: Path) -> None:
    """Reading, writing and the saved cwd never need the engine: the host folder, by handle."""
    ws = DockerWorkspace(
        tmp_path / "root", tmp_path / "state", conversation_id="c-files", team_id=7,
        image="unused", client_factory=_no_engine,
    )  # fmt: skip
    (ws.root / "real" / "sub").mkdir(parents=True)
    (ws.root / "alias").symlink_to("real")
    (ws.state_dir / "cwd").write_text("/workspace/real/sub")
    assert ws.current_dir() == ws.root / "real" / "sub"
    assert not edit(ws, "create", "new.txt", file_text="one\n").is_error
    assert (ws.root / "real" / "sub" / "new.txt").read_text() == "one\n"
    assert "one" in edit(ws, "view", "/workspace/real/sub/new.txt").content
    for saved in ("/workspace/alias/sub", "/etc", "/workspace/../etc", str(ws.root / "real")):
        (ws.state_dir / "cwd").write_text(saved)
        assert ws.current_dir() == ws.root, saved
    refused = edit(ws, "create", "/workspace/alias/x.txt", file_text="x")
    assert refused.is_error and "'alias' is a symbolic link" in refused.content
    assert str(ws.root) not in refused.content and "/workspace/alias/x.txt" in refused.content
    assert not (ws.root / "real" / "x.txt").exists()


def _no_engine() -> Any:
    raise AssertionError("the file tools must not need the Docker engine")
