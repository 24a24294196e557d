"""A Redis and a Postgres of a test's own, on free ports, that it may stop, restart or cut off
(the fault suite, and the worker and API tests that lose their broker). The shared services
(5432, 6379) are never touched."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not happen within {timeout}s")
        time.sleep(0.05)


class PrivateRedis:
    """`redis-server` without persistence: a restart loses every queued message, as a
    crashed broker without AOF does."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> PrivateRedis:
        self.proc = subprocess.Popen(
            [shutil.which("redis-server") or "redis-server", "--port", str(self.port),
             "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _wait(self.answers, 10, "the private redis to start")
        return self

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        """SIGKILL: a crash, nothing flushed."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def restart(self) -> None:
        self.stop()
        self.start()


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise RuntimeError(f"no {name} under /usr/lib/postgresql/*/bin")
    return found[-1]


class PrivatePostgres:
    """A throwaway cluster (initdb into a temp dir, trust auth, fsync off). initdb refuses to
    run as root, so as root the cluster belongs to the `postgres` OS user."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="canvas-faults-pg-"))
        self.data = self.dir / "data"
        self._as: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            self._as = ["runuser", "-u", "postgres", "--"]

    def _run(self, *argv: str) -> None:
        subprocess.run([*self._as, *argv], check=True, capture_output=True, timeout=120)

    def init(self) -> PrivatePostgres:
        self._run(_pg_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                  "--no-sync", "-E", "UTF8")  # fmt: skip
        return self.start()

    def start(self) -> PrivatePostgres:
        options = (
            # fsync off is safe for a crash of Postgres alone (the OS keeps what it wrote);
            # synchronous_commit must stay on: off, a crash loses commits it already
            # acknowledged, and the runner rightly trusts an acknowledged append.
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir} -c fsync=off "
            "-c full_page_writes=off -c max_connections=200"
        )
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-o", options,
                  "-l", str(self.dir / "log"), "-w", "-t", "60", "start")  # fmt: skip
        return self

    def stop(self, mode: str = "fast") -> None:
        """`immediate` is a crash: no checkpoint, every backend gone at once."""
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, mode: str = "immediate") -> None:
        self.stop(mode)
        self.start()

    def terminate_backends(self, dbname: str) -> int:
        """pg_terminate_backend on every other connection to `dbname`; how many."""
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (dbname,),
            ).fetchone()
        return int(row[0]) if row else 0

    def url(self, dbname: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{dbname}"

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
