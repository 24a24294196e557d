"""An agent in a container driven by AcpSession directly (no conversation): the line pump's
limit holds for Docker's demultiplexed stream, and paths the agent sends are read from the
container's /workspace and confined to the host folder behind it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from acp_bridge.client import resolve_inside
from acp_bridge.places import ContainerPlace
from acp_bridge.process import AgentProtocolError
from acp_bridge.session import AcpSession
from tests.acp_bridge.docker_turns import agent_image, processes_settled
from workspaces.base import WorkspacePathError
from workspaces.docker import DockerWorkspace

pytestmark = pytest.mark.docker


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[DockerWorkspace]:
    (tmp_path / "root").mkdir()
    ws = DockerWorkspace(
        tmp_path / "root", tmp_path / "state", conversation_id=f"s{uuid.uuid4().hex[:12]}",
        team_id=7, image=agent_image(),
    )  # fmt: skip
    yield ws
    client = docker.from_env()
    try:
        assert processes_settled(client, ws.conversation_id) == []
    finally:
        client.close()
        ws.close()


async def test_a_message_past_the_limit_is_a_protocol_error(workspace) -> None:
    place = ContainerPlace(workspace)
    async with AcpSession.start(
        "acp-docker-agent", env={}, cwd=workspace.root, place=place, message_limit=4096,
        timeout=20,
    ) as session:  # fmt: skip
        assert session.cwd == "/workspace"
        await session.new_session()
        await session.prompt("big 1000")  # well below: passes
        assert len(session.updates()[-1].content.text) == 1000
        with pytest.raises(AgentProtocolError, match="larger than the 4096 byte limit"):
            await session.prompt("big 200000")


def test_container_paths_map_to_the_host_folder_and_stay_inside(tmp_path) -> None:
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    (root / "escape").symlink_to("/etc")
    assert resolve_inside(root, "/workspace/d/x", agent_root="/workspace") == root / "d/x"
    assert resolve_inside(root, "/workspace", agent_root="/workspace") == root
    assert resolve_inside(root, "d/x", agent_root="/workspace") == root / "d/x"
    # From the text alone: the link is refused when it is opened (workspaces.fs), not here.
    assert resolve_inside(root, "/workspace/escape/passwd", agent_root="/workspace") == (
        root / "escape/passwd"
    )
    for bad in ("/etc/passwd", "/workspacex/a", str(root / "d/x"), "/workspace/../etc"):
        with pytest.raises(WorkspacePathError) as refused:
            resolve_inside(root, bad, agent_root="/workspace")
        assert str(root) not in str(refused.value).replace(repr(bad), "")
