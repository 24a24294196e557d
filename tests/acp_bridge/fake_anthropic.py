"""A tiny imitation of the Anthropic Messages API on 127.0.0.1, for running a real Claude Code
agent (through its ACP adapter) with no internet and no key.

It plays one scripted conversation. A main-loop call (one that offers the agent's tools) whose
last message carries no tool result is answered with a `tool_use` of the Write tool, creating
`target` with `content`; once the tool result comes back (allowed or refused) the answer is the
final text: `final_text` when the tool ran, `refused_text` when its result is an error (the
person refused). Every other call the CLI makes on the side (title or topic generation,
a quota probe, a haiku helper: calls without the tools) gets a short text, `count_tokens` a
count, model lists one model, and anything else an empty JSON object, so startup never stalls on
an unknown endpoint. Answers stream as server-sent events exactly like the real API when the
request asks for `stream`, else come back as one JSON message.

Every request is recorded in `requests` (method, path, parsed body) and logged, so a failing
test can show what the CLI asked for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.acp_bridge.fake_http import FakeHandler, FakeHttpServer

WRITE_TOOL = "Write"
FINAL_TEXT = "All done."
REFUSED_TEXT = "Understood, I did not write the file."
SIDE_TEXT = "Writing hello.txt"


@dataclass
class Script:
    target: Path
    content: str
    final_text: str = FINAL_TEXT
    refused_text: str = REFUSED_TEXT
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    """The tool_result blocks the agent sent back, in order (to tell allowed from refused)."""


class FakeAnthropic(FakeHttpServer):
    """Start with `with FakeAnthropic(target, content) as fake:`; `fake.base_url` is the value
    for ANTHROPIC_BASE_URL. What it made of each request: "tool_use", "final", "side",
    "count_tokens", "models", "other"."""

    name = "fake-anthropic"

    def __init__(
        self,
        target: Path,
        content: str,
        *,
        final_text: str = FINAL_TEXT,
        refused_text: str = REFUSED_TEXT,
    ) -> None:
        super().__init__()
        self.script = Script(
            target=Path(target), content=content, final_text=final_text, refused_text=refused_text
        )

    @property
    def base_url(self) -> str:
        return self.address

    # -- the script ----------------------------------------------------------------------------

    def answer_messages(self, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """(kind, the assistant message) for a POST /v1/messages body."""
        tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        results = [
            block
            for block in (last.get("content") if isinstance(last.get("content"), list) else [])
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]
        if WRITE_TOOL in tools and results:
            with self.lock:
                self.script.tool_results.extend(results)
            refused = any(block.get("is_error") for block in results)
            text = self.script.refused_text if refused else self.script.final_text
            return "final", self._message([_text(text)], "end_turn", body)
        if WRITE_TOOL in tools:
            block = {
                "type": "tool_use",
                "id": self.next_id("toolu"),
                "name": WRITE_TOOL,
                "input": {"file_path": str(self.script.target), "content": self.script.content},
            }
            return "tool_use", self._message([block], "tool_use", body)
        return "side", self._message([_text(SIDE_TEXT)], "end_turn", body)

    def _message(
        self, content: list[dict[str, Any]], stop_reason: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "id": self.next_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or "claude-sonnet-4-5",
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 12,
                "output_tokens": 8,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def sse_events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The stream the real API sends for `message`: message_start, per block a start, deltas
    and a stop, then message_delta (stop reason, output tokens) and message_stop."""
    start = dict(message, content=[], stop_reason=None, stop_sequence=None)
    start["usage"] = dict(message["usage"], output_tokens=1)
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            text = block["text"]
            # Two deltas, as the real API splits text: the client must join them.
            for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": piece},
                        },
                    )
                )
        else:
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": dict(block, input={}),
                    },
                )
            )
            raw = json.dumps(block["input"])
            for piece in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": piece},
                        },
                    )
                )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


class _Handler(FakeHandler):
    server_fake: FakeAnthropic
    reply_headers = (("request-id", "req_fake"),)

    def do_POST(self) -> None:
        body = self.read_body()
        path = self.path_only()
        if path.endswith("/v1/messages/count_tokens"):
            self.record(body, "count_tokens")
            self.reply_json(200, {"input_tokens": 42})
            return
        if path.endswith("/v1/messages") and isinstance(body, dict):
            kind, message = self.server_fake.answer_messages(body)
            self.record(body, kind)
            if body.get("stream"):
                self.reply_stream(sse_events(message))
            else:
                self.reply_json(200, message)
            return
        self.record(body, "other")
        self.reply_json(200, {})

    def do_GET(self) -> None:
        if self.path_only().endswith("/v1/models"):
            self.record(None, "models")
            model = {
                "type": "model",
                "id": "claude-sonnet-4-5",
                "display_name": "Claude Sonnet 4.5",
                "created_at": "2025-09-29T00:00:00Z",
            }
            self.reply_json(200, {"data": [model], "has_more": False, "first_id": model["id"],
                                  "last_id": model["id"]})  # fmt: skip
            return
        self.record(None, "other")
        self.reply_json(200, {})

    def do_HEAD(self) -> None:
        self.record(None, "other")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


FakeAnthropic.handler = _Handler
