"""A tiny imitation of the Gemini API (generativelanguage, v1beta) on 127.0.0.1, for running the
real Gemini CLI (`gemini --acp`) with no internet and no key.

It plays one scripted exchange per message. A main-loop call (one that offers the CLI's shell
tool) whose last turn is the person's text is answered with a `functionCall` of
run_shell_command running `command`; once the call's `functionResponse` comes back the answer is
the final text: `final_text` when the command ran, `refused_text` when the response is an error
(the person refused: the CLI answers `{"error": "... canceled by the user."}`). Every other
call the CLI makes on the side gets something it accepts: a call asking for JSON (the next
speaker check, the model router) an object filled from its schema with "user" as the next
speaker, other text calls a short text, `countTokens` a count, the model list one model, and
anything else an empty JSON object, so startup never stalls on an unknown endpoint. Answers
stream as server-sent events exactly like the real API for `:streamGenerateContent?alt=sse`.

Every request is recorded in `requests` (method, path, parsed body, what it was taken for)
and logged, so a failing test can show what the CLI asked for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tests.acp_bridge.fake_http import FakeHandler, FakeHttpServer

SHELL_TOOL = "run_shell_command"
MODEL = "gemini-2.5-flash"
FINAL_TEXT = "The command ran."
REFUSED_TEXT = "Understood, I did not run it."
SIDE_TEXT = "Running a command"


@dataclass
class Script:
    command: str
    final_text: str = FINAL_TEXT
    refused_text: str = REFUSED_TEXT
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    """The `response` objects of the functionResponses the CLI sent back, in order."""


class FakeGemini(FakeHttpServer):
    """Start with `with FakeGemini(command) as fake:`; `fake.address` is the value for
    GOOGLE_GEMINI_BASE_URL."""

    name = "fake-gemini"

    def __init__(
        self, command: str, *, final_text: str = FINAL_TEXT, refused_text: str = REFUSED_TEXT
    ) -> None:
        super().__init__()
        self.script = Script(command=command, final_text=final_text, refused_text=refused_text)

    # -- the script ----------------------------------------------------------------------------

    def answer(self, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        """(kind, the model's parts) for a generateContent body."""
        tools = {
            declaration.get("name")
            for tool in body.get("tools") or []
            for declaration in (tool.get("functionDeclarations") or [])
            if isinstance(declaration, dict)
        }
        config = body.get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        if schema is not None or config.get("responseMimeType") == "application/json":
            return "json", [{"text": json.dumps(_fill(schema or {}))}]
        if SHELL_TOOL not in tools:
            return "side", [{"text": SIDE_TEXT}]
        contents = body.get("contents") or []
        last = contents[-1] if contents else {}
        responses = [
            part["functionResponse"].get("response") or {}
            for part in last.get("parts") or []
            if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict)
        ]
        if responses:
            with self.lock:
                self.script.tool_results.extend(responses)
            refused = any("error" in response for response in responses)
            return "final", [
                {"text": self.script.refused_text if refused else self.script.final_text}
            ]
        call = {
            "id": self.next_id("call"),
            "name": SHELL_TOOL,
            "args": {"command": self.script.command, "description": "Run the command."},
        }
        return "tool_call", [{"functionCall": call}]


def _fill(schema: dict[str, Any]) -> Any:
    """A value of `schema` (the JSON the CLI asks its side calls for): an enum's first value,
    "user" for the next speaker (so the CLI never continues on its own), required properties
    of objects filled in turn."""
    kind = str(schema.get("type", "object")).lower()
    if schema.get("enum"):
        return "user" if "user" in schema["enum"] else schema["enum"][0]
    if kind == "object":
        properties = schema.get("properties") or {}
        names = schema.get("required") or list(properties)
        return {
            name: "user" if name == "next_speaker" else _fill(properties.get(name) or {})
            for name in names
        }
    if kind == "array":
        return []
    if kind in ("number", "integer"):
        return 0
    if kind == "boolean":
        return False
    return "ok"


def response(parts: list[dict[str, Any]], finish: str | None = "STOP") -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 8, "totalTokenCount": 20},
        "modelVersion": MODEL,
        "responseId": "fake",
    }


def sse_chunks(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The stream the real API sends: text split in two chunks (the client must join them),
    the finish reason on the last."""
    if len(parts) == 1 and "text" in parts[0]:
        text = parts[0]["text"]
        half = len(text) // 2
        return [response([{"text": text[:half]}], None), response([{"text": text[half:]}])]
    return [response(parts)]


class _Handler(FakeHandler):
    server_fake: FakeGemini

    def do_POST(self) -> None:
        body = self.read_body()
        path = self.path_only()
        if path.endswith(":countTokens"):
            self.record(body, "count_tokens")
            self.reply_json(200, {"totalTokens": 42})
            return
        streaming = path.endswith(":streamGenerateContent")
        if (streaming or path.endswith(":generateContent")) and isinstance(body, dict):
            kind, parts = self.server_fake.answer(body)
            self.record(body, kind)
            if streaming:
                self.reply_stream((None, chunk) for chunk in sse_chunks(parts))
            else:
                self.reply_json(200, response(parts))
            return
        self.record(body, "other")
        self.reply_json(200, {})

    def do_GET(self) -> None:
        if self.path_only().endswith("/models"):
            self.record(None, "models")
            model = {"name": f"models/{MODEL}", "displayName": "Gemini 2.5 Flash",
                     "supportedGenerationMethods": ["generateContent", "countTokens"]}  # fmt: skip
            self.reply_json(200, {"models": [model]})
            return
        self.record(None, "other")
        self.reply_json(200, {})


FakeGemini.handler = _Handler
