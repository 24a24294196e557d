"""A tiny imitation of the OpenAI Responses API on 127.0.0.1, for running a real Codex agent
(through @zed-industries/codex-acp) with no internet and no key.

It plays one scripted exchange per user message. A `POST /v1/responses` whose input ends with
the user's message (no tool output after it) is answered with a call of whichever shell tool
the request offers, running `command`; once that call's output comes back the answer is a
message, `FINAL_TEXT`. Other calls (model lists, anything unknown) get an empty list or object,
so startup never stalls on an endpoint this fake does not know. Answers stream as server-sent
events the way the real API does (response.created, output items, response.completed).

Every request is recorded (method, path, parsed body, what the server made of it) and logged,
so a failing test can show what the agent asked for.
"""

from __future__ import annotations

import json
from typing import Any

from tests.acp_bridge.fake_http import FakeHandler, FakeHttpServer

FINAL_TEXT = "All done."
PROMPT = "Create codex.txt in the workspace."
OUTPUT = "codex was here"
COMMAND = f"printf '{OUTPUT}' > codex.txt && cat codex.txt"
"""What the tests have the fake ask for: a command Codex asks about (not known to be harmless),
writing a file and printing what it wrote."""
MODEL = "gpt-5.3-codex"
"""A model Codex knows (its bundled catalog): no "model metadata not found" message."""
SHELL_TOOLS = ("shell_command", "shell", "exec_command")
"""The shell tools Codex offers, depending on the model: the first one present is called."""


def _shell_arguments(tool: str, command: str) -> dict[str, Any]:
    if tool == "shell":
        return {"command": ["bash", "-lc", command]}
    if tool == "exec_command":
        return {"cmd": command}
    return {"command": command}


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t.get("name") or "" for t in body.get("tools") or [] if isinstance(t, dict)]


class _Handler(FakeHandler):
    server_fake: FakeResponses

    def do_POST(self) -> None:
        body = self.read_body()
        if self.path_only().endswith("/responses") and isinstance(body, dict):
            fake = self.server_fake
            kind, items = fake.answer(body)
            self.record(body, kind)
            self.reply_stream((event["type"], event) for event in fake.events(items))
            return
        self.record(body, "other")
        self.reply_json(200, {})

    def do_GET(self) -> None:
        models = self.path_only().endswith("/models")
        self.record(None, "models" if models else "other")
        self.reply_json(200, {"object": "list", "data": [], "models": []} if models else {})


class FakeResponses(FakeHttpServer):
    """Start with `with FakeResponses(command) as fake:`; `fake.base_url` ends in /v1, the
    value for a Codex model provider's base_url."""

    name = "fake-openai"
    handler = _Handler

    def __init__(self, command: str, *, final_text: str = FINAL_TEXT) -> None:
        super().__init__()
        self.command = command
        self.final_text = final_text
        self.tool_outputs: list[str] = []
        """The output of each shell call the agent sent back, in order."""

    @property
    def base_url(self) -> str:
        return f"{self.address}/v1"

    def answer(self, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        """(kind, the output items) for a POST /v1/responses body."""
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        last = items[-1] if items else {}
        tools = [t for t in SHELL_TOOLS if t in tool_names(body)]
        if last.get("type") in ("function_call_output", "custom_tool_call_output"):
            output = last.get("output")
            with self.lock:
                self.tool_outputs.append(output if isinstance(output, str) else json.dumps(output))
            return "final", [self._message(self.final_text)]
        if tools and last.get("role") == "user":
            call = {
                "type": "function_call",
                "id": self.next_id("fc"),
                "call_id": self.next_id("call"),
                "name": tools[0],
                "arguments": json.dumps(_shell_arguments(tools[0], self.command)),
            }
            return "tool_call", [call]
        return "side", [self._message("ok")]

    def _message(self, text: str) -> dict[str, Any]:
        return {
            "type": "message",
            "id": self.next_id("msg"),
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }

    def events(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The stream the real API sends for a response made of `items`: created, each item
        added (a message's text in two deltas) and done, completed with the usage."""
        response_id = self.next_id("resp")
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": {"id": response_id, "status": "in_progress"}}
        ]
        for index, item in enumerate(items):
            events.append({"type": "response.output_item.added", "output_index": index,
                           "item": item})  # fmt: skip
            if item["type"] == "message":
                text = item["content"][0]["text"]
                for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                    events.append({"type": "response.output_text.delta", "item_id": item["id"],
                                   "output_index": index, "content_index": 0, "delta": piece})  # fmt: skip
            events.append({"type": "response.output_item.done", "output_index": index,
                           "item": item})  # fmt: skip
        usage = {
            "input_tokens": 12,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 8,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 20,
        }
        events.append({"type": "response.completed", "response": {
            "id": response_id, "status": "completed", "output": items, "usage": usage,
        }})  # fmt: skip
        return events
