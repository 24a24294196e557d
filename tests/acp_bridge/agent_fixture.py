"""A real ACP agent for the bridge's tests, written with the SDK's agent side.

Run as `python tests/acp_bridge/agent_fixture.py`. The prompt text is a command; the agent
answers with message chunks (JSON where a test needs to read a result):

    stream                      message and thought chunks, a tool call and its update, a plan
    env                         the sorted keys of its os.environ
    read PATH [LINE LIMIT]      fs/read_text_file
    write PATH TEXT...          fs/write_text_file
    terminal LIMIT CMD ARG...   terminal/create, wait_for_exit, output, release
    permission                  session/request_permission, reports the outcome
    crash                       os._exit(3) after a line on stderr
    garbage                     a non-JSON line on stdout
    hang                        starts a child `sleep` in its group, then never answers
    wait                        says `waiting`, answers `cancelled` once session/cancel arrives
    ignore-cancel               says `ignoring`, never answers, even after session/cancel
    big N                       one message chunk of N characters
    escape OUTSIDE              reads /proc/1, /proc/<ppid> and every /proc/*/environ, tries to
                                write OUTSIDE/escaped, $HOME/home-ok and ./inside-ok; reports
    edit PATH TEXT...           an edit tool call that asks permission, then writes PATH (or
                                not) and reports the call completed with a diff (or failed)
    run CMD ARG...              an execute tool call showing a terminal running CMD
    state                       mode, usage (with a cost) and commands updates
    echo                        {"session", "loaded", "prompt"}: the whole prompt it was sent
    slow N                      N message chunks, 0.2 s apart (a turn to interrupt)

The command is the prompt's last paragraph, so a prompt with history before it still works.
With FIXTURE_LOAD=1 in its environment the agent offers session/load, and replays one user
and one agent chunk for the loaded session before answering. Like real agents it keeps its
sessions at home ($HOME/.fixture-sessions/<id>, written by session/new): loading one that is
not there fails with -32002 (resource not found).

`new_session` sends an available-commands update before its answer, so a client sees an update
for a session id it does not know yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import acp
from acp import helpers
from acp.schema import (
    AgentCapabilities,
    AvailableCommand,
    EnvVariable,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
    UsageUpdate,
)

SESSIONS = Path(os.environ.get("HOME", "/nonexistent")) / ".fixture-sessions"


class FixtureAgent:
    def __init__(self) -> None:
        self._conn: Any = None
        self._cancelled: dict[str, asyncio.Event] = {}
        self._loaded: set[str] = set()

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        loads = os.environ.get("FIXTURE_LOAD") == "1"
        return InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=loads),
        )

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> LoadSessionResponse:
        if not (SESSIONS / session_id).is_file():
            raise acp.RequestError.resource_not_found(session_id)
        self._cancelled[session_id] = asyncio.Event()
        self._loaded.add(session_id)
        await self._conn.session_update(session_id, helpers.update_user_message_text("earlier"))
        await self._conn.session_update(session_id, helpers.update_agent_message_text("replayed"))
        return LoadSessionResponse()

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = f"sess-{uuid.uuid4().hex[:8]}"
        self._cancelled[session_id] = asyncio.Event()
        with contextlib.suppress(OSError):  # a home it cannot write: nothing to load later
            SESSIONS.mkdir(parents=True, exist_ok=True)
            (SESSIONS / session_id).write_text(cwd)
        await self._conn.session_update(
            session_id,
            helpers.update_available_commands(
                [AvailableCommand(name="stream", description="stream every update kind")]
            ),
        )
        return NewSessionResponse(session_id=session_id)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self._cancelled[session_id].set()

    async def _say(self, session_id: str, text: str) -> None:
        await self._conn.session_update(session_id, helpers.update_agent_message_text(text))

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt)
        self._prompt = text
        name, _, rest = text.rsplit("\n\n", 1)[-1].partition(" ")
        self._cancelled[session_id].clear()
        result = await getattr(self, "_do_" + name.replace("-", "_"))(session_id, rest)
        return PromptResponse(stop_reason=result or "end_turn")

    async def _do_stream(self, session_id: str, rest: str) -> None:
        say = self._conn.session_update
        await say(session_id, helpers.update_agent_thought_text("thinking"))
        for word in ("one ", "two ", "three"):
            await say(session_id, helpers.update_agent_message_text(word))
        await say(session_id, helpers.start_tool_call("call-1", "Read notes", kind="read"))
        await say(
            session_id,
            helpers.update_tool_call(
                "call-1", status="completed", content=[helpers.tool_content(acp.text_block("ok"))]
            ),
        )
        await say(
            session_id,
            helpers.update_plan(
                [helpers.plan_entry("look"), helpers.plan_entry("fix", status="in_progress")]
            ),
        )

    async def _do_env(self, session_id: str, rest: str) -> None:
        await self._say(session_id, json.dumps(sorted(os.environ)))

    async def _do_read(self, session_id: str, rest: str) -> None:
        path, *numbers = rest.split(" ")
        line, limit = (int(numbers[0]), int(numbers[1])) if numbers else (None, None)
        try:
            response = await self._conn.read_text_file(
                session_id=session_id, path=path, line=line, limit=limit
            )
            await self._say(session_id, json.dumps({"content": response.content}))
        except acp.RequestError as exc:
            await self._say(session_id, json.dumps({"error": exc.code, "data": exc.data}))

    async def _do_write(self, session_id: str, rest: str) -> None:
        path, _, content = rest.partition(" ")
        try:
            await self._conn.write_text_file(session_id=session_id, path=path, content=content)
            await self._say(session_id, json.dumps({"ok": True}))
        except acp.RequestError as exc:
            await self._say(session_id, json.dumps({"error": exc.code, "data": exc.data}))

    async def _do_terminal(self, session_id: str, rest: str) -> None:
        limit, command, *args = rest.split(" ")
        created = await self._conn.create_terminal(
            session_id=session_id,
            command=command,
            args=args,
            env=[EnvVariable(name="FIXTURE_VAR", value="from-agent")],
            output_byte_limit=int(limit),
        )
        exited = await self._conn.wait_for_terminal_exit(
            session_id=session_id, terminal_id=created.terminal_id
        )
        output = await self._conn.terminal_output(
            session_id=session_id, terminal_id=created.terminal_id
        )
        await self._conn.release_terminal(session_id=session_id, terminal_id=created.terminal_id)
        report = {
            "output": output.output,
            "truncated": output.truncated,
            "exit_code": exited.exit_code,
            "status_code": output.exit_status.exit_code if output.exit_status else None,
        }
        await self._say(session_id, json.dumps(report))

    async def _do_permission(self, session_id: str, rest: str) -> None:
        response = await self._conn.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate(tool_call_id="call-9", title="Run rm", kind="execute"),
            options=[
                PermissionOption(option_id="allow-1", name="Allow once", kind="allow_once"),
                PermissionOption(option_id="reject-1", name="Reject", kind="reject_once"),
            ],
        )
        outcome = response.outcome
        chosen = getattr(outcome, "option_id", None)
        await self._say(session_id, json.dumps({"outcome": outcome.outcome, "option_id": chosen}))

    async def _do_crash(self, session_id: str, rest: str) -> None:
        sys.stderr.write("fixture: about to crash, token=sekrit-123\n")
        sys.stderr.flush()
        os._exit(3)

    async def _do_garbage(self, session_id: str, rest: str) -> None:
        os.write(1, b"this is not json\n")
        await asyncio.sleep(3600)

    async def _do_hang(self, session_id: str, rest: str) -> None:
        child = subprocess.Popen(["sleep", "600"])  # stays in our process group
        await self._say(session_id, json.dumps({"child": child.pid}))
        await asyncio.sleep(3600)

    async def _do_wait(self, session_id: str, rest: str) -> str:
        await self._say(session_id, "waiting")  # a test cancels once it sees the turn run
        await self._cancelled[session_id].wait()
        return "cancelled"

    async def _do_ignore_cancel(self, session_id: str, rest: str) -> None:
        await self._say(session_id, "ignoring")
        await asyncio.sleep(3600)

    async def _do_big(self, session_id: str, rest: str) -> None:
        await self._say(session_id, "x" * int(rest))

    async def _do_escape(self, session_id: str, rest: str) -> None:
        environs: dict[str, str] = {}
        paths = ["/proc/1/environ", f"/proc/{os.getppid()}/environ"]
        paths += [str(p) for p in sorted(Path("/proc").glob("[0-9]*/environ"))]
        for path in paths:
            try:
                environs[path] = Path(path).read_bytes().decode("utf-8", "replace")
            except OSError as exc:
                environs[path] = f"error: {exc}"
        writes: dict[str, str] = {}
        for path in (f"{rest}/escaped", f"{os.environ['HOME']}/home-ok", "inside-ok"):
            try:
                Path(path).write_text("x")
                writes[path] = "written"
            except OSError as exc:
                writes[path] = f"error: {exc}"
        report = {"pid": os.getpid(), "ppid": os.getppid(), "environs": environs, "writes": writes}
        await self._say(session_id, json.dumps(report))

    async def _do_edit(self, session_id: str, rest: str) -> None:
        path, _, content = rest.partition(" ")
        say = self._conn.session_update
        call = f"edit-{uuid.uuid4().hex[:6]}"
        await say(session_id, helpers.start_edit_tool_call(call, f"Edit {path}", path, content))
        response = await self._conn.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate(tool_call_id=call, title=f"Edit {path}", kind="edit"),
            options=[
                PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
                PermissionOption(option_id="always", name="Always allow", kind="allow_always"),
                PermissionOption(option_id="no", name="Reject", kind="reject_once"),
            ],
        )
        chosen = getattr(response.outcome, "option_id", None)
        if chosen in ("yes", "always"):
            await self._conn.write_text_file(session_id=session_id, path=path, content=content)
            await say(
                session_id,
                helpers.update_tool_call(
                    call, status="completed",
                    content=[helpers.tool_diff_content(path, content, None)],
                ),
            )  # fmt: skip
            await self._say(session_id, f"edited {path}")
        else:
            await say(session_id, helpers.update_tool_call(call, status="failed"))
            await self._say(session_id, f"refused ({response.outcome.outcome})")

    async def _do_run(self, session_id: str, rest: str) -> None:
        command, *args = rest.split(" ")
        say = self._conn.session_update
        await say(session_id, helpers.start_tool_call("run-1", f"Run {rest}", kind="execute",
                                                      status="in_progress"))  # fmt: skip
        terminal = await self._conn.create_terminal(
            session_id=session_id, command=command, args=args
        )
        tid = terminal.terminal_id
        await say(
            session_id,
            helpers.update_tool_call("run-1", content=[helpers.tool_terminal_ref(tid)]),
        )
        await self._conn.wait_for_terminal_exit(session_id=session_id, terminal_id=tid)
        await say(
            session_id,
            helpers.update_tool_call(
                "run-1", status="completed", content=[helpers.tool_terminal_ref(tid)]
            ),
        )
        await self._conn.release_terminal(session_id=session_id, terminal_id=tid)
        await self._say(session_id, "ran it")

    async def _do_state(self, session_id: str, rest: str) -> None:
        say = self._conn.session_update
        await say(session_id, helpers.update_current_mode("plan"))
        await say(
            session_id,
            UsageUpdate(
                session_update="usage_update", used=1200, size=200000,
                cost={"amount": 0.25, "currency": "USD"},
            ),
        )  # fmt: skip
        await say(
            session_id,
            helpers.update_available_commands([AvailableCommand(name="init", description="x")]),
        )

    async def _do_echo(self, session_id: str, rest: str) -> None:
        report = {"session": session_id, "loaded": session_id in self._loaded,
                  "prompt": self._prompt}  # fmt: skip
        await self._say(session_id, json.dumps(report))

    async def _do_slow(self, session_id: str, rest: str) -> str:
        for index in range(int(rest)):
            if self._cancelled[session_id].is_set():
                return "cancelled"
            await self._say(session_id, f"chunk {index} ")
            await asyncio.sleep(0.2)
        return "end_turn"


if __name__ == "__main__":
    asyncio.run(acp.run_agent(FixtureAgent()))
