"""Admin-configured command hooks around the agent loop.

A hook gets the event as JSON on stdin. It blocks by exiting with code 2 or by printing
{"decision": "deny", "reason": ...}; anything else lets the step go on. A hook that times out
or crashes is reported, and then treated as its configuration says: fail-open lets the step
go on, fail-closed blocks it.

Hooks are admin-written but run on the same host as the agents they watch, on payloads the
agent wrote; so they go through workspaces.sandbox like every other host command: the system's
tools read-only, the conversation's workspace (their cwd, writable; a private /tmp when there
is none), no view of the worker's files, processes or environment, and the team's network.
Tools a hook needs must be under /usr or in CANVAS_SANDBOX_READONLY_PATHS: its command is a
shell line run inside, so nothing in it adds a mount, and its one mount (the workspace, by real
path) is judged by the sandbox like any other (a folder resolving to / or /etc is refused, and
the hook counts as failed). Where there is no
sandbox and unsandboxed commands are not allowed, the hook fails (and its fail mode decides).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teams.vocabulary import HOOK_EVENTS
from workspaces.sandbox import PATH, Network, SandboxSpec, SandboxUnavailable, popen

DENY_EXIT_CODE = 2
EVENTS = HOOK_EVENTS
MAX_REASON_CHARS = 2000


@dataclass(frozen=True, slots=True)
class HookSpec:
    name: str
    event: str
    command: str
    matcher: str = ""
    """Regular expression on the tool name; empty matches every tool (and non-tool events)."""
    timeout: float = 10.0
    fail_closed: bool = False

    def applies_to(self, event: str, tool: str | None) -> bool:
        if event != self.event:
            return False
        if not self.matcher or tool is None:
            return True
        return re.fullmatch(self.matcher, tool) is not None


@dataclass(frozen=True, slots=True)
class HookOutcome:
    hook: str
    allowed: bool
    reason: str = ""
    failure: str = ""
    """Set when the hook itself broke (timeout, crash, bad output): worth reporting."""


def _clean_env(cwd: str | None) -> dict[str, str]:
    # Hooks are admin code but still get no server secrets from the worker's environment.
    return {"PATH": PATH, "LANG": "C.UTF-8", "HOME": cwd or "/tmp"}


def run_hook(
    spec: HookSpec, payload: Mapping[str, Any], *, cwd: str | None = None,
    network: Network = "none",
) -> HookOutcome:  # fmt: skip
    """Run one hook in the sandbox, in `cwd` (the conversation's workspace) with the team's
    `network`, and decide. Never raises for a misbehaving hook."""
    # The real path, as LocalWorkspace uses: the mount, cwd and HOME all name one directory.
    where = Path(os.path.realpath(cwd)) if cwd else None
    sandbox = SandboxSpec(
        cwd=where or Path("/tmp"),
        writable=(where,) if where else (),
        env=_clean_env(cwd),
        network=network,
    )
    try:
        proc = popen(
            sandbox, ["/bin/bash", "--noprofile", "--norc", "-c", spec.command],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
    except SandboxUnavailable as exc:
        return _broken(spec, str(exc))
    except OSError as exc:
        return _broken(spec, f"could not start: {exc}")
    try:
        out, err = proc.communicate(json.dumps(payload).encode(), timeout=spec.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return _broken(spec, f"timed out after {spec.timeout:g}s")
    stdout = out.decode(errors="replace").strip()
    stderr = err.decode(errors="replace").strip()
    if proc.returncode == DENY_EXIT_CODE:
        return HookOutcome(
            spec.name, False, (stderr or stdout or "denied by hook")[:MAX_REASON_CHARS]
        )
    if proc.returncode != 0:
        return _broken(spec, f"exited with code {proc.returncode}: {stderr[:500]}")
    decision = _parse_decision(stdout)
    if decision is not None and decision.get("decision") == "deny":
        reason = str(decision.get("reason") or "denied by hook")
        return HookOutcome(spec.name, False, reason[:MAX_REASON_CHARS])
    return HookOutcome(spec.name, True)


def _parse_decision(stdout: str) -> dict[str, Any] | None:
    if not stdout.startswith("{"):
        return None
    try:
        data = json.loads(stdout)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _broken(spec: HookSpec, failure: str) -> HookOutcome:
    if spec.fail_closed:
        return HookOutcome(spec.name, False, f"hook {spec.name!r} failed ({failure}); "
                           "it is configured to block when it fails.", failure)  # fmt: skip
    return HookOutcome(spec.name, True, "", failure)


def run_hooks(
    specs: list[HookSpec], event: str, payload: Mapping[str, Any], *, tool: str | None = None,
    cwd: str | None = None, network: Network = "none",
) -> list[HookOutcome]:  # fmt: skip
    """Run every hook for `event` in order, stopping at the first that blocks."""
    outcomes: list[HookOutcome] = []
    for spec in specs:
        if not spec.applies_to(event, tool):
            continue
        outcome = run_hook(spec, payload, cwd=cwd, network=network)
        outcomes.append(outcome)
        if not outcome.allowed:
            break
    return outcomes
