"""Network "outbound": a sandboxed command reaches the outside only through the outbound guard
(workspaces.egress), which lets through what common.netguard allows for the site and answers
403 otherwise; a program that ignores the proxy reaches nothing, and the proxy ends with the
command."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import textwrap
import threading
from pathlib import Path

import pytest

from tests.conftest import wait_for
from workspaces import egress, sandbox

PROBE = textwrap.dedent(
    """
    import json, os, socket, sys, urllib.error, urllib.request
    port = int(sys.argv[1])
    out = {}
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        out["direct"] = "connected"
    except OSError as exc:
        out["direct"] = type(exc).__name__
    try:
        out["proxied"] = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read().decode()
    except urllib.error.HTTPError as exc:
        out["proxied"] = f"{exc.code} {exc.read().decode().strip()}"
    relay = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    relay.sendall(b"CONNECT 10.1.2.3:443 HTTP/1.1\\r\\nHost: 10.1.2.3:443\\r\\n\\r\\n")
    out["connect"] = relay.recv(4096).decode().split("\\r\\n")[0]
    print(json.dumps(out))
    """
)


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *args) -> None:
        pass


def _run(tmp_path: Path, port: int) -> dict:
    spec = sandbox.SandboxSpec(cwd=tmp_path, writable=(tmp_path,), network="outbound")
    with sandbox.prepare(spec, ["/usr/bin/python3", "-c", PROBE, str(port)]) as launch:
        proc = launch.popen(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    return json.loads(out)


@pytest.fixture
def hello_port():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_only_the_guard_reaches_out_and_it_ends_with_the_command(
    tmp_path, settings, hello_port, monkeypatch
) -> None:
    settings.CANVAS_UNSANDBOXED_COMMANDS = False
    proxies: list[egress.EgressProxy] = []
    real = egress.EgressProxy

    def recording(*args, **kwargs):
        proxies.append(real(*args, **kwargs))
        return proxies[-1]

    monkeypatch.setattr(egress, "EgressProxy", recording)

    settings.CANVAS_ALLOWED_PRIVATE_NETWORKS = []
    refused = _run(tmp_path, hello_port)
    assert refused["direct"] == "ConnectionRefusedError"  # its own loopback, not the host's
    assert refused["proxied"].startswith(
        "403 the outbound guard refused it: 127.0.0.1 is a loopback"
    )
    assert refused["connect"] == "HTTP/1.1 403 Forbidden"

    settings.CANVAS_ALLOWED_PRIVATE_NETWORKS = ["127.0.0.1/32"]
    allowed = _run(tmp_path, hello_port)
    assert allowed["direct"] == "ConnectionRefusedError" and allowed["proxied"] == "hello"
    assert allowed["connect"] == "HTTP/1.1 403 Forbidden"  # 10/8 is still not listed

    assert len(proxies) == 2
    for proxy in proxies:  # each proxy stopped once its command's lifeline closed
        wait_for(lambda p=proxy: not os.path.exists(p.folder), timeout=5, message="proxy left")
