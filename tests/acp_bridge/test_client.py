"""The ACP client and agent lifecycle against a real agent process (agent_fixture.py)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AvailableCommandsUpdate,
    ToolCallProgress,
    ToolCallStart,
)

from acp_bridge.client import parts_inside, resolve_inside
from acp_bridge.process import AgentCrashed, AgentProtocolError, AgentTimeout
from acp_bridge.session import AcpSession
from acp_bridge.terminals import truncate_front
from tests.escape import CANARY_NAME, sandbox_broken, worker_values
from workspaces.base import WorkspacePathError
from workspaces.sandbox import SandboxUnavailable

AGENT = str(Path(__file__).with_name("agent_fixture.py"))
AGENT_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "FIXTURE_TOKEN": "given"}
# What the sandbox must show read-only for this venv's python to run the fixture: the venv
# (its pyvenv.cfg and site-packages, where acp lives), the interpreter it points at, the
# fixture's directory. Nothing else of the repository.
AGENT_READONLY = (Path(sys.prefix), Path(sys.base_prefix), Path(AGENT).parent)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_gone(pid: int, *, group: bool, seconds: float = 5.0) -> bool:
    """True once the process (group) is gone or only a zombie awaiting its reaper."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if group and not group_alive(pid):
            return True
        if not group:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except FileNotFoundError:
                return True
            if state == "Z":
                return True
        time.sleep(0.02)
    return False


def texts(updates: list[Any]) -> list[str]:
    return [u.content.text for u in updates if isinstance(u, AgentMessageChunk)]


def last_json(session: AcpSession) -> Any:
    return json.loads(texts(session.updates())[-1])


async def wait_for_update(session: AcpSession, seconds: float = 10.0) -> None:
    """Until the turn in progress has sent a message chunk."""
    before = len(texts(session.updates()))
    deadline = time.monotonic() + seconds
    while len(texts(session.updates())) == before:
        assert time.monotonic() < deadline, "no message from the agent"
        await asyncio.sleep(0.05)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def start(workspace: Path, **kwargs: Any):
    kwargs.setdefault("timeout", 20.0)
    return AcpSession.start(
        sys.executable, [AGENT], env=AGENT_ENV, cwd=workspace, readonly=AGENT_READONLY, **kwargs
    )


def group_members(pgid: int) -> list[tuple[int, str]]:
    """(host pid, command name) of every process in the group, seen from the host."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            comm, rest = stat.read_text().split(" (", 1)[1].rsplit(")", 1)
        except (OSError, IndexError, ValueError):
            continue
        if int(rest.split()[2]) == pgid:
            found.append((int(stat.parent.name), comm))
    return found


async def test_updates_arrive_in_order_and_early_ones_are_buffered(workspace) -> None:
    seen: list[tuple[str, Any]] = []
    async with start(workspace, on_update=lambda sid, u: seen.append((sid, u))) as s:
        assert s.initialize_response.protocol_version == 1
        session_id = await s.new_session()
        # Sent before session/new answered: held, then delivered once the id was known.
        assert [type(u) for _, u in seen] == [AvailableCommandsUpdate]
        result = await s.prompt("stream")
        assert result.stop_reason == "end_turn"
        kinds = [type(u) for u in s.updates()]
        assert kinds == [
            AvailableCommandsUpdate,
            AgentThoughtChunk,
            AgentMessageChunk,
            AgentMessageChunk,
            AgentMessageChunk,
            ToolCallStart,
            ToolCallProgress,
            AgentPlanUpdate,
        ]
        assert texts(s.updates()) == ["one ", "two ", "three"]
        assert [u for _, u in seen] == s.updates()
        assert {sid for sid, _ in seen} == {session_id}
        assert s.updates()[6].status == "completed"
        assert [e.content for e in s.updates()[7].entries] == ["look", "fix"]
        pgid = s.process.pgid
    assert wait_gone(pgid, group=True)


async def test_read_with_line_and_limit(workspace) -> None:
    (workspace / "notes.txt").write_text("a\nb\nc\nd\n")
    async with start(workspace) as s:
        await s.new_session()
        await s.prompt(f"read {workspace / 'notes.txt'} 2 2")
        assert last_json(s) == {"content": "b\nc\n"}
        await s.prompt(f"read {workspace / 'notes.txt'}")
        assert last_json(s) == {"content": "a\nb\nc\nd\n"}
        await s.prompt(f"read {workspace / 'missing.txt'}")
        assert last_json(s)["error"] == -32002


async def test_write_inside_works_and_outside_is_refused(workspace, tmp_path) -> None:
    outside = tmp_path / "outside.txt"
    (workspace / "link").symlink_to(tmp_path)
    async with start(workspace) as s:
        await s.new_session()
        await s.prompt(f"write {workspace / 'sub/new.txt'} hello there")
        assert last_json(s) == {"ok": True}
        assert (workspace / "sub/new.txt").read_text() == "hello there"
        for path in (outside, workspace / ".." / "outside.txt", workspace / "link/outside.txt"):
            await s.prompt(f"write {path} nope")
            reply = last_json(s)
            assert reply["error"] == -32602, path
            details = reply["data"]["details"]
            assert any(why in details for why in ("workspace", "..", "'link' is a symbolic link"))
        await s.prompt("read /etc/hostname")
        assert last_json(s)["error"] == -32602
    assert not outside.exists()


def test_resolve_inside(tmp_path) -> None:
    root = tmp_path.resolve()
    (root / "d").mkdir()
    (root / "link").symlink_to(tmp_path.parent)
    assert resolve_inside(root, str(root / "d/x")) == root / "d/x"
    assert resolve_inside(root, "d/x") == root / "d/x"
    assert parts_inside(root, str(root)) == []
    assert parts_inside(root, "link/x") == ["link", "x"]  # from the text: opening it refuses
    for bad in ("../x", "/etc/passwd", f"{root}/d/../x", "a\0b", f"{root}x/y"):
        with pytest.raises(WorkspacePathError):
            resolve_inside(root, bad)


async def test_reads_and_writes_refuse_links_even_inside(workspace, tmp_path) -> None:
    (workspace / "real").mkdir()
    (workspace / "real" / "f.txt").write_text("real")
    (workspace / "alias").symlink_to("real")
    (workspace / "f-link.txt").symlink_to("real/f.txt")
    async with start(workspace) as s:
        await s.new_session()
        for path in ("alias/f.txt", "f-link.txt"):
            await s.prompt(f"read {workspace / path}")
            reply = last_json(s)
            assert reply["error"] == -32602 and "is a symbolic link" in reply["data"]["details"]
            await s.prompt(f"write {workspace / path} changed")
            reply = last_json(s)
            assert reply["error"] == -32602 and "is a symbolic link" in reply["data"]["details"]
        await s.prompt(f"write {workspace / 'real/f.txt'} changed")
        assert last_json(s) == {"ok": True}
    assert (workspace / "real" / "f.txt").read_text() == "changed"
    assert (workspace / "f-link.txt").is_symlink()


def test_truncate_front_keeps_the_end_on_a_character_boundary() -> None:
    data = "aé€😀".encode()  # 1 + 2 + 3 + 4 bytes
    assert truncate_front(data, 100) == ("aé€😀", False)
    assert truncate_front(data, 4) == ("😀", True)
    assert truncate_front(data, 6) == ("😀", True)  # cut inside € drops its tail bytes
    assert truncate_front(data, 7) == ("€😀", True)
    assert truncate_front(data, 3) == ("", True)
    assert truncate_front(data, 0) == ("", True)


async def test_terminal_runs_sandboxed_and_output_is_cut_from_the_front(workspace) -> None:
    async with start(workspace) as s:
        await s.new_session()
        await s.prompt("terminal 7 printf ééééé")  # 10 bytes, limit 7: cut inside an é
        assert last_json(s) == {
            "output": "ééé",
            "truncated": True,
            "exit_code": 0,
            "status_code": 0,
        }
        await s.prompt("terminal 100000 env")
        report = last_json(s)
        env = dict(line.split("=", 1) for line in report["output"].splitlines())
        assert env["FIXTURE_VAR"] == "from-agent"
        assert not {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "FIXTURE_TOKEN"} & env.keys()
        await s.prompt("terminal 100 false")
        assert last_json(s)["exit_code"] == 1


async def test_permission_choice_reaches_the_agent(workspace) -> None:
    asked: list[Any] = []

    async def choose(session_id, tool_call, options):
        asked.append((tool_call.title, [o.option_id for o in options]))
        return next(o.option_id for o in options if o.kind == "allow_once")

    async with start(workspace, on_permission=choose) as s:
        await s.new_session()
        await s.prompt("permission")
        assert last_json(s) == {"outcome": "selected", "option_id": "allow-1"}
    assert asked == [("Run rm", ["allow-1", "reject-1"])]


async def test_permission_defaults_to_cancelled_and_unknown_ids_too(workspace) -> None:
    async with start(workspace) as s:
        await s.new_session()
        await s.prompt("permission")
        assert last_json(s) == {"outcome": "cancelled", "option_id": None}

    async def made_up(*_):
        return "allow-everything"

    async with start(workspace, on_permission=made_up) as s:
        await s.new_session()
        await s.prompt("permission")
        assert last_json(s)["outcome"] == "cancelled"


async def test_cancel_answers_an_open_permission_request(workspace) -> None:
    asked = asyncio.Event()

    async def never(*_):
        asked.set()
        await asyncio.sleep(3600)

    async with start(workspace, on_permission=never) as s:
        await s.new_session()
        turn = asyncio.create_task(s.prompt("permission"))
        await asyncio.wait_for(asked.wait(), 10)
        await s.cancel()
        await asyncio.wait_for(turn, 10)
        assert last_json(s)["outcome"] == "cancelled"


async def test_cancel_ends_a_cooperative_turn(workspace) -> None:
    async with start(workspace) as s:
        await s.new_session()
        turn = asyncio.create_task(s.prompt("wait"))
        await wait_for_update(s)  # the turn runs: a cancel sent now cannot come before it
        await s.cancel()
        assert (await asyncio.wait_for(turn, 10)).stop_reason == "cancelled"


async def test_crash_raises_agent_crashed_with_exit_code_and_no_process_left(workspace) -> None:
    async with start(workspace, redact=lambda t: t.replace("sekrit-123", "[redacted]")) as s:
        await s.new_session()
        pgid = s.process.pgid
        with pytest.raises(AgentCrashed) as caught:
            await s.prompt("crash")
    assert caught.value.exit_code == 3
    assert "exited with code 3" in str(caught.value)
    assert any("about to crash" in line for line in caught.value.stderr_tail)
    assert "sekrit-123" not in str(caught.value) and "[redacted]" in str(caught.value)
    assert wait_gone(pgid, group=True)


async def test_garbage_on_stdout_is_a_protocol_error(workspace) -> None:
    async with start(workspace) as s:
        await s.new_session()
        pgid = s.process.pgid
        with pytest.raises(AgentProtocolError, match="not json"):
            await s.prompt("garbage")
    assert wait_gone(pgid, group=True)


@pytest.mark.parametrize("command", ["hang", "ignore-cancel"])
async def test_a_hang_times_out_and_the_whole_group_is_killed(workspace, command) -> None:
    async with start(workspace) as s:
        await s.new_session()
        pgid = s.process.pgid
        turn = asyncio.create_task(s.prompt(command, timeout=1.5))
        await wait_for_update(s)  # the turn runs (for `hang`: its child too)
        child = None
        if command == "ignore-cancel":
            await s.cancel()
        else:
            # The agent's pid for it is the sandbox's own; find it from the host.
            child = next(pid for pid, name in group_members(pgid) if name == "sleep")
        with pytest.raises(AgentTimeout):
            await turn
    assert wait_gone(pgid, group=True)
    if child is not None:
        assert wait_gone(child, group=False)


async def test_a_three_megabyte_message_passes(workspace) -> None:
    size = 3 * 1024 * 1024
    async with start(workspace) as s:
        await s.new_session()
        await s.prompt(f"big {size}")
        assert len(texts(s.updates())[-1]) == size


async def test_a_message_over_the_limit_is_a_protocol_error(workspace) -> None:
    async with start(workspace, message_limit=1024 * 1024) as s:
        await s.new_session()
        pgid = s.process.pgid
        with pytest.raises(AgentProtocolError, match="larger than the 1048576 byte limit"):
            await s.prompt(f"big {2 * 1024 * 1024}")
    assert wait_gone(pgid, group=True)


async def test_after_a_timeout_the_agent_stays_failed(workspace) -> None:
    async with start(workspace) as s:
        await s.new_session()
        with pytest.raises(AgentTimeout):
            await s.prompt("ignore-cancel", timeout=0.5)
        with pytest.raises(AgentTimeout):
            await s.prompt("stream")


async def test_the_agent_sees_only_the_environment_it_was_given(workspace, monkeypatch) -> None:
    monkeypatch.setenv("SECRET_KEY", "worker-secret")
    monkeypatch.setenv("DATABASE_URL", "postgres://worker")
    async with start(workspace) as s:
        await s.new_session()
        await s.prompt("env")
        keys = set(last_json(s))
    assert not {"DATABASE_URL", "REDIS_URL", "SECRET_KEY"} & keys
    assert {"PATH", "FIXTURE_TOKEN"} <= keys


async def test_a_command_that_does_not_exist_is_agent_crashed(workspace) -> None:
    with pytest.raises(AgentCrashed, match="could not start"):
        async with AcpSession.start("/nonexistent/agent", env={}, cwd=workspace):
            pass


def test_runs_on_its_own_loop_in_a_worker_thread(workspace) -> None:
    """As a Celery task will: asyncio.run in a thread that is not the main one."""
    outcome: dict[str, Any] = {}

    async def turn() -> None:
        async with start(workspace) as s:
            await s.new_session()
            outcome["stop"] = (await s.prompt("stream")).stop_reason
            outcome["pgid"] = s.process.pgid

    def run() -> None:
        try:
            asyncio.run(turn())
        except BaseException as exc:  # noqa: BLE001 - reported to the test below
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["stop"] == "end_turn"
    assert wait_gone(outcome["pgid"], group=True)


async def test_the_agent_cannot_read_the_workers_environment_even_through_proc(
    workspace, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv(CANARY_NAME, f"canary-{os.getpid()}-{time.time_ns()}")
    monkeypatch.setenv("DATABASE_URL", os.environ.get("DATABASE_URL") or "postgres://worker")
    outside = tmp_path / "outside"
    outside.mkdir()
    async with start(workspace) as s:
        await s.new_session()
        await s.prompt(f"escape {outside}")
        report = last_json(s)
    environs = report["environs"]
    # It tried pid 1, its parent and every process it can see: bwrap and itself, no other.
    assert {"/proc/1/environ", f"/proc/{report['ppid']}/environ"} <= environs.keys()
    assert set(environs) == {"/proc/1/environ", f"/proc/{report['pid']}/environ"}
    assert environs["/proc/1/environ"] == ""  # bwrap started with an empty environment
    seen = "\n".join(environs.values())
    for name, value in worker_values().items():
        assert value not in seen, f"the worker's {name} leaked"
    assert CANARY_NAME not in seen and "DATABASE_URL" not in seen
    # Its own environment is all it finds: the sandbox's processes are bwrap (empty) and it.
    own = environs[f"/proc/{report['pid']}/environ"]
    assert "FIXTURE_TOKEN=given" in own
    assert report["pid"] < 10  # a pid of its own namespace


async def test_the_agent_cannot_write_outside_the_workspace(workspace, tmp_path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    async with start(workspace) as s:
        await s.new_session()
        await s.prompt(f"escape {outside}")
        writes = last_json(s)["writes"]
        home = next(path for path in writes if path.endswith("/home-ok"))
        assert writes[home] == "written"  # its private home
    assert writes[f"{outside}/escaped"].startswith("error")
    assert not (outside / "escaped").exists()
    assert writes["inside-ok"] == "written"
    assert (workspace / "inside-ok").read_text() == "x"
    assert not Path(home).parent.exists()  # the private home goes with the agent


async def test_without_a_sandbox_the_agent_is_refused_unless_the_site_allows_it(
    workspace, settings
) -> None:
    with (
        sandbox_broken(settings, allow_unsandboxed=False),
        pytest.raises(SandboxUnavailable, match="CANVAS_UNSANDBOXED_COMMANDS"),
    ):
        async with start(workspace):
            pass
    with sandbox_broken(settings, allow_unsandboxed=True):
        async with start(workspace) as s:
            await s.new_session()
            assert (await s.prompt("stream")).stop_reason == "end_turn"
