"""An MCP server over Streamable HTTP (the fixture server on 127.0.0.1): reached only where
the outbound-address guard allows the address, with a header taken from a team secret."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from orchestration.mcp.launch import server_launch
from orchestration.mcp.rules import McpServerConfig, secret_refs
from orchestration.mcp.toolbox import McpToolbox
from tests.conftest import wait_for

from .fixture import MARKER, SERVER, server_pids


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, SERVER, "--http", str(port), MARKER],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for(lambda: _listening(port), 20, message="the HTTP MCP server to listen")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(10)
        wait_for(lambda: not server_pids(), 10, message="the HTTP server to end")


@pytest.fixture
def toolbox() -> Iterator[McpToolbox]:
    box = McpToolbox()
    yield box
    box.close()


def _launch(url: str):
    config = McpServerConfig(
        name="remote", transport="http", url=url,
        headers=secret_refs({"X-Token": {"secret": "API_TOKEN"}, "X-Plain": "text"}),
    )  # fmt: skip
    return server_launch(config, secrets={"API_TOKEN": "tok-http-1"}, workspace=None,
                         network="none")  # fmt: skip


def test_a_loopback_server_is_refused_unless_the_site_allows_it(toolbox, http_server, settings):
    settings.CANVAS_ALLOWED_PRIVATE_NETWORKS = []
    tools, failed = toolbox.open([_launch(http_server)])
    assert tools == [] and "loopback" in failed[0].reason


def test_tools_are_called_with_the_secret_header(toolbox, http_server, settings):
    settings.CANVAS_ALLOWED_PRIVATE_NETWORKS = ["127.0.0.0/8"]
    tools, failed = toolbox.open([_launch(http_server)])
    assert failed == [] and "echo" in {t.name for t in tools}
    assert toolbox.call("remote", "echo", {"text": "hi"}, cancel=None).content == "echo: hi"

    def header(name: str) -> str:
        return toolbox.call("remote", "header_value", {"name": name}, cancel=None).content

    assert (header("x-token"), header("x-plain")) == ("tok-http-1", "text")
