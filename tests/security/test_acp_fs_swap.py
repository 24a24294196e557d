"""Issue 23: an external agent's fs/read_text_file and fs/write_text_file requests are served
by the worker, outside the sandbox, while the agent (or a command of another conversation
sharing the folder) trades `d` for a link to another team's workspace in a loop
(tests/security/swapper.py). No read may return the other team's file, no write may land in
their folder, and every request ends in a response or a clear ACP error, never another
exception.

The requests go to the real `WorkspaceClient` handlers, as the SDK calls them for an agent.
On 34cf807 (realpath, then open by name) this failed: reads returned the other team's file and
writes landed in its folder.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError

from acp_bridge.client import WorkspaceClient
from tests.security.swapper import make_trap, swapping
from tests.security.test_file_editor_swap import TRIES, attempts

MARKER = "OTHER-TEAM-SECRET-9b2e"
INSIDE = "our own file\n"
INVALID_PARAMS, NOT_FOUND = -32602, -32002


@pytest.fixture
def trap(tmp_path: Path) -> tuple[WorkspaceClient, Path, Path, Path]:
    """(client over our workspace, outside, d, its swap partner)."""
    root = tmp_path / "team-1" / "ws"
    outside = tmp_path / "team-2" / "ws"
    outside.mkdir(parents=True)
    (outside / "file").write_text(f"{MARKER}\n")
    folder, link = make_trap(root, outside)
    (folder / "file").write_text(INSIDE)
    return WorkspaceClient(root=root), outside, folder, link


async def outcome_of(request: Awaitable[Any]) -> tuple[str, str]:
    """(outcome, text): ok, refused (a clear ACP error), or what went wrong."""
    try:
        response = await request
    except RequestError as exc:
        details = str((exc.data or {}).get("details", "")) if isinstance(exc.data, dict) else ""
        if exc.code == INVALID_PARAMS and "is a symbolic link; links are not followed" in details:
            return "refused", details
        if exc.code == NOT_FOUND:
            return "refused", "not found"
        return f"unclear {exc.code}", f"{exc} {exc.data}"
    except Exception as exc:  # noqa: BLE001 - counted: none may escape
        return f"escaped {type(exc).__name__}", str(exc)
    text = getattr(response, "content", None) or ""
    return ("leaked" if MARKER in text else "ok"), text


async def test_reads_never_return_another_teams_file(trap) -> None:
    client, outside, folder, link = trap
    outcomes: Counter[str] = Counter()
    odd: list[str] = []
    path = str(client.root / "d" / "file")
    with swapping(folder, link):
        for _ in attempts(outcomes):
            outcome, text = await outcome_of(client.read_text_file(session_id="s", path=path))
            outcomes[outcome] += 1
            if outcome == "ok" and text != INSIDE:
                outcomes["wrong content"] += 1
            if outcome not in ("ok", "refused"):
                odd.append(text)
            await asyncio.sleep(0)
    assert set(outcomes) <= {"ok", "refused"}, (outcomes, odd[:3])
    assert outcomes["ok"] > 0 and outcomes["refused"] > 0, outcomes  # the race really ran


async def test_writes_never_land_in_another_teams_folder(trap) -> None:
    client, outside, folder, link = trap
    outcomes: Counter[str] = Counter()
    odd: list[str] = []
    written: list[str] = []
    with swapping(folder, link):
        for i in attempts(outcomes):
            path = str(client.root / "d" / f"new-{i}")
            request = client.write_text_file(session_id="s", path=path, content=f"new {i}\n")
            outcome, text = await outcome_of(request)
            outcomes[outcome] += 1
            if outcome == "ok":
                written.append(f"new-{i}")
            elif outcome != "refused":
                odd.append(text)
        # Overwriting a file of the same name as the other team's: never theirs.
        for _ in range(TRIES // 10):
            path = str(client.root / "d" / "file")
            outcome, text = await outcome_of(
                client.write_text_file(session_id="s", path=path, content=INSIDE)
            )
            outcomes[outcome] += 1
    assert sorted(p.name for p in outside.iterdir()) == ["file"]
    assert (outside / "file").read_text() == f"{MARKER}\n"
    assert set(outcomes) <= {"ok", "refused"}, (outcomes, odd[:3])
    assert outcomes["ok"] > 0 and outcomes["refused"] > 0, outcomes
    assert not folder.is_symlink()  # the swapper put it back
    assert sorted(p.name for p in folder.iterdir()) == sorted([*written, "file"])
