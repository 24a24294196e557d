"""ACP turns in Docker workspaces for tests: the test image with the bash agent
(docker_agent.sh) installed, its site profile, and what is running in a conversation's
container (for the leftover check: only the container's own init and `sleep infinity` may be
left after a turn)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker

from tests import docker_images
from tests.acp_bridge.conftest import SETTLE_SECONDS
from workspaces.docker import LABEL_CONVERSATION

AGENT_PATH = "/usr/local/bin/acp-docker-agent"
AGENT_SCRIPT = Path(__file__).with_name("docker_agent.sh")
PROFILE = "docker-agent"
RESIDENTS = ("docker-init", "sleep infinity")
"""What every container runs when nothing of a command or an agent is left in it."""


def agent_image() -> str:
    """The busybox test image with the bash ACP agent as `acp-docker-agent` on its PATH."""
    return docker_images.test_image_with("busybox-acp", ((AGENT_PATH, AGENT_SCRIPT.read_bytes()),))


def docker_profile(**extra: Any) -> dict[str, Any]:
    """The CANVAS_ACP_AGENTS entry: a bare command, found in the container's PATH."""
    return {"command": "acp-docker-agent", **extra}


def containers(client: docker.DockerClient, conversation_id: object) -> list:
    label = f"{LABEL_CONVERSATION}={conversation_id}"
    return client.containers.list(all=True, filters={"label": label})


def container_processes(client: docker.DockerClient, conversation_id: object) -> list[str]:
    """The command lines of what runs in the conversation's container, less its residents."""
    found = []
    for container in containers(client, conversation_id):
        container.reload()
        if container.status != "running":
            continue
        top = client.api.top(container.id, ps_args="-eo pid,args")
        column = top["Titles"].index("COMMAND") if "COMMAND" in top["Titles"] else -1
        for row in top["Processes"] or []:
            command = row[column]
            if not any(command.startswith(r) or f"/{r}" in command for r in RESIDENTS):
                found.append(command)
    return found


def docker_engine(settings) -> Iterator[docker.DockerClient]:
    """For a fixture: the engine with the agent's image as the site's only one. After the
    test, nothing but the residents may run in a container it made (its conversation ids in
    `engine.made`), as conftest.py checks this host; then they are removed."""
    image = agent_image()
    settings.CANVAS_DOCKER_IMAGE = image
    settings.CANVAS_DOCKER_IMAGES = [image]
    client = docker.from_env()
    made: list[str] = []
    client.made = made  # type: ignore[attr-defined]
    yield client
    try:
        left = {c: processes_settled(client, c) for c in made}
        assert not any(left.values()), f"processes left in containers: {left}"
    finally:
        for conversation_id in made:
            for container in containers(client, conversation_id):
                container.remove(force=True, v=True)
        client.close()


def processes_settled(client: docker.DockerClient, conversation_id: object) -> list[str]:
    """`container_processes` once it is empty, or after SETTLE_SECONDS (a killed group is
    reaped asynchronously)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    left = container_processes(client, conversation_id)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = container_processes(client, conversation_id)
    return left
