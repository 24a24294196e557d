"""An attacker's process that swaps a folder for a symbolic link, over and over.

What a command in a conversation can do to the host code that reads or writes its workspace:
`renameat2(RENAME_EXCHANGE)` trades the names of a real directory and a link to somewhere
outside in one atomic step, so a host reader that checks a path and then opens it by name may
find the check true and the open elsewhere. Tests run host-side code against a workspace while
this runs and assert that nothing outside was ever read or written.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# The child: exchange the two names as fast as it can until it is killed. It reports once it
# has exchanged at least once, so a test never races a swapper that has not started.
_LOOP = textwrap.dedent(
    """
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    a, b = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
    started = False
    while True:
        if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
            sys.exit("renameat2: " + os.strerror(ctypes.get_errno()))
        if not started:
            started = True
            print("swapping", flush=True)
    """
)


def make_trap(workspace: Path, outside: Path, name: str = "d") -> tuple[Path, Path]:
    """`workspace/name`, a real folder, and `workspace/.swap-name`, a link to `outside`: the
    pair a swapper trades. Returns (folder, link)."""
    folder = workspace / name
    folder.mkdir(parents=True, exist_ok=True)
    link = workspace / f".swap-{name}"
    link.symlink_to(outside, target_is_directory=True)
    return folder, link


@contextmanager
def swapping(a: Path, b: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Exchange the names `a` and `b` in a loop while the block runs; stopped (and the
    original order restored when it ends swapped) on the way out."""
    proc = subprocess.Popen(
        [sys.executable, "-I", "-c", _LOOP, str(a), str(b)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != b"swapping":
            proc.wait(5)
            raise RuntimeError(f"the swapper did not start: {proc.stderr.read().decode()}")
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if a.is_symlink() and not b.is_symlink():  # stopped mid-way: put the folder back
            os.rename(a, str(a) + ".tmp")
            os.rename(b, a)
            os.rename(str(a) + ".tmp", b)


def deadline(seconds: float) -> float:
    return time.monotonic() + seconds
