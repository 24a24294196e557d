"""`manage.py serve` in the embedded mode as a subprocess, and its JSON API as a token holder:
for the tests of a fresh server process and for bench/first_event.py."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


_TEMPLATE: Path | None = None


def prepared_var(var: Path) -> None:
    """Fill `var` (a CANVAS_VAR_DIR) with what `migrate` and `ensure_demo_user` make: a copy
    of a folder this test process made once. Migrating SQLite from scratch costs a server
    test ~6 s of CPU, and a dozen modules each wanted their own (issue 24)."""
    global _TEMPLATE
    if _TEMPLATE is None:
        template = Path(tempfile.mkdtemp(prefix="canvas-embedded-template-"))
        atexit.register(shutil.rmtree, template, ignore_errors=True)
        env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
        env |= {"CANVAS_VAR_DIR": str(template), "DJANGO_SETTINGS_MODULE": "canvas.settings"}
        for command in (["migrate", "--noinput"], ["ensure_demo_user"]):
            subprocess.run(
                [sys.executable, str(REPO / "manage.py"), *command], cwd=REPO, env=env,
                check=True, capture_output=True,
            )  # fmt: skip
        _TEMPLATE = template
    shutil.copytree(_TEMPLATE, var, dirs_exist_ok=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EmbeddedServer:
    """One fresh `manage.py serve` process on a free port (`prepare`: `serve --prepare`, as
    `make up` runs it); output to `log`, or dropped."""

    def __init__(
        self, env: dict[str, str], token: str = "", *, prepare: bool = False,
        log: Path | None = None,
    ) -> None:  # fmt: skip
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.token = token
        command = [sys.executable, str(REPO / "manage.py"), "serve", "--host", "127.0.0.1",
                   "--port", str(self.port), *(["--prepare"] if prepare else [])]  # fmt: skip
        out = log.open("ab") if log is not None else subprocess.DEVNULL
        self.process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
        )

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """The API at `path` (after /api), with the token; the parsed JSON answer."""
        request = urllib.request.Request(
            f"{self.base}/api{path}", method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def answering(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base}/login/", timeout=2):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        """SIGTERM the process we started, SIGKILL if it lingers."""
        if self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
