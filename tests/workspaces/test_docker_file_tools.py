"""The file tools on a Docker workspace: the agent sees its files at /workspace, and every way
out (`..`, another absolute path, a link made inside the container, a NUL byte) is refused with
a clear error, as in a local workspace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestration.tools.base import ToolContext, ToolResult
from orchestration.tools.file_editor import FileEditorArgs, FileEditorTool
from tests.workspaces.test_docker import engine, make  # noqa: F401 (the engine fixture)
from workspaces.docker import DockerWorkspace


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
    assert "outside the workspace" in result.content or "not a valid path" in result.content
    assert str(ws.root) not in result.content  # the agent is told its own paths, not the host's
    assert not (tmp_path / "outside.txt").exists()
