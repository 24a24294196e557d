"""The test server's launch and its processes: a marker on its command line names this
pytest's servers in /proc, whoever their parent is now."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

SERVER = str(Path(__file__).with_name("server_fixture.py"))
MARKER = f"mcp-test-{uuid.uuid4().hex[:12]}"
READONLY = [sys.prefix, sys.base_prefix, str(Path(SERVER).parent)]
"""What the sandbox must show for the server to run: the venv, its interpreter, this folder."""


def server_fields(**extra) -> dict:
    """A stdio server's fields for orchestration.mcp.servers."""
    return {"transport": "stdio", "command": sys.executable, "args": [SERVER, MARKER], **extra}


def server_pids() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if MARKER.encode() in cmdline:
            found.append(int(entry.name))
    return found
