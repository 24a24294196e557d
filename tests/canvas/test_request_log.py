"""The request log `manage.py serve` writes: one line per HTTP request, path without query."""

from __future__ import annotations

import logging

import pytest

from canvas.request_log import RequestLog


async def answer(status: int):
    async def app(scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    return app


async def call(app, scope: dict) -> list[dict]:
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"password=hunter2", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    await RequestLog(app)(scope, receive, send)
    return sent


def http(method: str, path: str, query: bytes = b"") -> dict:
    return {"type": "http", "method": method, "path": path, "query_string": query}


async def test_one_line_with_method_path_status_and_milliseconds(caplog) -> None:
    caplog.set_level(logging.INFO, logger="canvas.requests")
    sent = await call(await answer(401), http("POST", "/api/conversations", b"token=s3cret"))
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    (record,) = [r for r in caplog.records if r.name == "canvas.requests"]
    method, path, status, ms, unit = record.getMessage().split()
    assert (method, path, status, unit) == ("POST", "/api/conversations", "401", "ms")
    assert float(ms) >= 0
    assert "s3cret" not in caplog.text and "hunter2" not in caplog.text


async def test_a_failing_request_is_logged_without_a_status(caplog) -> None:
    caplog.set_level(logging.INFO, logger="canvas.requests")

    async def broken(scope, receive, send) -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await call(broken, http("GET", "/x/"))
    assert [r.getMessage().rsplit(" ", 2)[0] for r in caplog.records] == ["GET /x/ -"]


async def test_websockets_pass_through_unlogged(caplog) -> None:
    caplog.set_level(logging.INFO, logger="canvas.requests")
    seen: list[str] = []

    async def app(scope, receive, send) -> None:
        seen.append(scope["type"])

    await call(app, {"type": "websocket", "path": "/ws/ui/conversations/x/"})
    assert seen == ["websocket"]
    assert not caplog.records
