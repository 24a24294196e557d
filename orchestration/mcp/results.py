"""An MCP tool result as the model reads it: the text parts joined, every other part named
(an image, audio, a resource), the structured content as JSON when nothing else was said, and
the server's isError as an error observation."""

from __future__ import annotations

import json
from typing import Any

from ..tools.base import ToolResult

MAX_RESULT_CHARS = 200_000
"""A runaway server must not fill the log; a cut says so."""


def _part(block: Any) -> str:
    kind = getattr(block, "type", "unknown")
    if kind == "text":
        return block.text
    if kind in ("image", "audio"):
        return f"[{kind}: {block.mime_type}]"
    if kind == "resource_link":
        return f"[resource link: {block.uri}]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        if text is not None:
            return f"[resource {resource.uri}]\n{text}"
        return f"[resource: {resource.uri} ({resource.mime_type or 'binary'})]"
    return f"[{kind}]"


def tool_result(result: Any) -> ToolResult:
    """`result`: the SDK's CallToolResult."""
    parts = [_part(block) for block in result.content or ()]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts) or "(the tool returned nothing)"
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[cut: the result was {len(text)} characters]"
    return ToolResult(content=text, is_error=bool(result.is_error))
