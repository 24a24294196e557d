"""ContainerProcess against the real engine: a program in the container with stdin attached,
in a group of its own that `kill_group` ends (children included), and that a later runner's
`stop_leftovers` finds when the one that started it died. The leftover check of
tests/acp_bridge/docker_turns.py sees what is left. Never skipped."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from tests import docker_images
from tests.acp_bridge.docker_turns import container_processes
from tests.conftest import wait_for
from workspaces.docker import DockerLimits, DockerWorkspace
from workspaces.docker_process import ContainerProcess, container_which

pytestmark = pytest.mark.docker

PREFIX = f"p{uuid.uuid4().hex[:10]}"


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[DockerWorkspace]:
    workspace = DockerWorkspace(
        tmp_path / "root", tmp_path / "state", conversation_id=f"{PREFIX}-{uuid.uuid4().hex[:6]}",
        team_id=7, image=docker_images.test_image(), limits=DockerLimits(memory_mb=64, pids=64),
    )  # fmt: skip
    yield workspace
    workspace.close()


def _read_all(sock: socket.socket, pending: bytes, timeout: float = 10) -> bytes:
    """The payloads of Docker's frames until the stream ends."""
    data = bytearray(pending)
    sock.settimeout(timeout)
    while chunk := sock.recv(65536):
        data += chunk
    out, at = bytearray(), 0
    while at + 8 <= len(data):
        size = int.from_bytes(data[at + 4 : at + 8], "big")
        out += data[at + 8 : at + 8 + size]
        at += 8 + size
    return bytes(out)


def test_stdin_reaches_it_and_its_env_is_exactly_what_was_given(ws) -> None:
    process = ContainerProcess.start(
        ws, ["sh", "-c", "read -r line; echo got $line $GIVEN; pwd"], env={"GIVEN": "yes"},
        cwd="/workspace", stdin=True,
    )  # fmt: skip
    try:
        process.sock.sendall(b"hello\n")
        process.sock.shutdown(socket.SHUT_WR)
        assert _read_all(process.sock, process.pending) == b"got hello yes\n/workspace\n"
        assert process.wait(10) == 0
    finally:
        process.close()
    assert not list(ws.runs_dir.iterdir()) and not list(ws.state_dir.glob("run-*"))


def test_kill_group_ends_the_program_and_its_children(ws) -> None:
    client = docker.from_env()
    process = ContainerProcess.start(
        ws, ["sh", "-c", "sleep 611 & sleep 612"], env={}, cwd="/workspace", stdin=False
    )
    try:
        wait_for(lambda: len(container_processes(client, ws.conversation_id)) >= 3)
        assert any("sleep 611" in p for p in container_processes(client, ws.conversation_id))
        assert process.kill_group(grace=0.5)
        wait_for(lambda: not container_processes(client, ws.conversation_id), 10)
        assert process.wait(10) is not None
    finally:
        process.close()
        client.close()


def test_a_dead_runners_process_is_stopped_by_the_next_runner(ws, tmp_path) -> None:
    client = docker.from_env()
    process = ContainerProcess.start(
        ws, ["sleep", "613"], env={}, cwd="/workspace", stdin=False
    )  # the runner "dies": no kill, no close
    wait_for(lambda: list(ws.runs_dir.glob("run-*/command.pgid")), message="it started")
    later = DockerWorkspace(
        ws.root, ws.state_dir, conversation_id=ws.conversation_id, team_id=7, image=ws.image
    )
    assert later.stop_leftovers() == 1
    deadline = time.monotonic() + 10
    while container_processes(client, ws.conversation_id) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert container_processes(client, ws.conversation_id) == []
    process.close()
    client.close()


def test_which_looks_in_the_container(ws) -> None:
    assert container_which(ws, "sh", env={}, cwd="/workspace")
    assert not container_which(ws, "no-such-program", env={}, cwd="/workspace")
