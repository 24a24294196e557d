"""A minimal ACP agent for bench/acp_bridge.py, written with the SDK's agent side (like
tests/acp_bridge/agent_fixture.py), that answers as fast as it can:

    noop        nothing: the turn ends at once
    chunks N    N agent message chunks, back to back
    tools N     N tool calls, each started and then completed (2 updates each)
    ask K       K permission requests (an edit), one after the other

Each turn ends with one message chunk holding a JSON report: `send_ms` (how long the agent
took to send what it sent) and, for `ask`, `rtt_ms` (request sent -> answer received, per
request) and `asked` / `answered` (time.monotonic() stamps, the same clock as the bench's).

    python bench/acp_agent.py
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import acp
from acp import helpers
from acp.schema import (
    AgentCapabilities,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
)

OPTIONS = [
    PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
    PermissionOption(option_id="no", name="Reject", kind="reject_once"),
]


class BenchAgent:
    def __init__(self) -> None:
        self._conn: Any = None

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION, agent_capabilities=AgentCapabilities()
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id=f"bench-{uuid.uuid4().hex[:8]}")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        pass

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt)
        name, _, count = text.rsplit("\n\n", 1)[-1].strip().partition(" ")
        started = time.perf_counter()
        report: dict[str, Any] = await getattr(self, f"_do_{name}")(session_id, int(count or 0))
        report["send_ms"] = (time.perf_counter() - started) * 1000
        await self._conn.session_update(
            session_id, helpers.update_agent_message_text(json.dumps(report))
        )
        return PromptResponse(stop_reason="end_turn")

    async def _do_noop(self, session_id: str, count: int) -> dict[str, Any]:
        return {}

    async def _do_chunks(self, session_id: str, count: int) -> dict[str, Any]:
        for index in range(count):
            await self._conn.session_update(
                session_id, helpers.update_agent_message_text(f"c{index} ")
            )
        return {}

    async def _do_tools(self, session_id: str, count: int) -> dict[str, Any]:
        say = self._conn.session_update
        for index in range(count):
            call = f"call-{index}"
            await say(session_id, helpers.start_tool_call(call, f"Read {index}", kind="read"))
            content = [helpers.tool_content(acp.text_block("ok"))]
            await say(
                session_id, helpers.update_tool_call(call, status="completed", content=content)
            )
        return {}

    async def _do_ask(self, session_id: str, count: int) -> dict[str, Any]:
        asked, answered, chosen = [], [], []
        for index in range(count):
            call = f"edit-{index}"
            asked.append(time.monotonic())
            response = await self._conn.request_permission(
                session_id=session_id,
                tool_call=ToolCallUpdate(tool_call_id=call, title=f"Edit f{index}", kind="edit"),
                options=OPTIONS,
            )
            answered.append(time.monotonic())
            chosen.append(getattr(response.outcome, "option_id", None))
            await self._conn.session_update(
                session_id,
                helpers.update_tool_call(
                    call, status="completed", content=[helpers.tool_content(acp.text_block("ok"))]
                ),
            )
        rtt = [(b - a) * 1000 for a, b in zip(asked, answered, strict=True)]
        return {"rtt_ms": rtt, "asked": asked, "answered": answered, "chosen": chosen}


if __name__ == "__main__":
    asyncio.run(acp.run_agent(BenchAgent()))
