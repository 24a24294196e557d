"""Webhook deliveries accepted per second: from the signature check to the answer.

A GitHub-style `pull_request` delivery (2.3 KB, signed `X-Hub-Signature-256`) to
`POST /hooks/{id}`, three ways, each on its own automations so that the concurrency rule
never holds one back:

- refused: a bad signature, 401 (the cheapest answer: the lookup and the HMAC);
- ignored: signed, the filter false, 200 (an `ignored` run recorded);
- accepted: signed and passing, 202 (the run recorded and committed, then its conversation
  made: first events appended, its first slice sent to the broker).

In this process (`automations.webhooks.delivery_receive`, no HTTP, the slice enqueue captured)
one delivery after another; then over HTTP against `manage.py serve` (uvicorn, production
settings, the rate limit raised) from 8 client threads with keep-alive connections, the
slices really sent to Redis (purged at the end: no worker takes them). Reports deliveries/s
for each and the ratios accepted / refused (what recording and starting a run costs over
checking it).

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/webhooks.py [--quick] [--json F]
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402

DELIVERIES = 300
QUICK_DELIVERIES = 40
THREADS = 8
RATE = "1000000"
"""CANVAS_WEBHOOK_RATE_PER_MINUTE for the bench: the limit is not what is measured."""
KINDS = ("refused", "ignored", "accepted")


def _payload(number: int) -> dict[str, Any]:
    return {
        "action": "opened", "number": number,
        "pull_request": {
            "number": number, "title": "Fix the flaky login test " * 4,
            "html_url": f"https://github.com/acme/web/pull/{number}",
            "user": {"login": "octocat"}, "body": "Steps to reproduce. " * 60,
            "head": {"ref": "fix-login", "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e"},
            "base": {"ref": "main"}, "labels": [{"name": "tests"}, {"name": "ci"}],
        },
        "repository": {"full_name": "acme/web"}, "sender": {"login": "octocat"},
    }  # fmt: skip


def _automations(kind: str, count: int) -> list[tuple[int, str]]:
    """`count` automations of one owner: (id, webhook secret)."""
    from django.contrib.auth import get_user_model

    from automations.services import automation_create
    from teams.services import team_create

    user = get_user_model().objects.create_user(f"bench-{uuid.uuid4().hex[:8]}")
    team = team_create(user=user, name=f"{user.get_username()}'s team")
    made = []
    for i in range(count):
        created = automation_create(
            by=user, team=team, name=f"{kind}-{i}", trigger="webhook", model="scripted",
            prompt_template="Review {{ payload.repository.full_name }}#{{ payload.number }}: "
            "{{ payload.pull_request.title }}",
            filter="action == 'closed'" if kind == "ignored" else "",
        )  # fmt: skip
        made.append((created.automation.pk, created.secret))
    return made


def _request(kind: str, automation: tuple[int, str], number: int) -> tuple[bytes, dict]:
    from automations.signatures import sign_github

    body = json.dumps(_payload(number)).encode()
    secret = automation[1] if kind != "refused" else "not-the-secret"
    headers = {
        "Content-Type": "application/json", "X-GitHub-Event": "pull_request",
        "X-GitHub-Delivery": uuid.uuid4().hex, "X-Hub-Signature-256": sign_github(secret, body),
    }  # fmt: skip
    return body, headers


EXPECTED = {"refused": 401, "ignored": 200, "accepted": 202}


def _in_process(kind: str, count: int) -> dict[str, Any]:
    from automations.webhooks import delivery_receive

    automations = _automations(kind, count)
    requests = [_request(kind, a, i) for i, a in enumerate(automations)]
    statuses: dict[int, int] = {}
    with common.captured_enqueues():
        started = time.perf_counter()
        for (automation_id, _), (body, headers) in zip(automations, requests, strict=True):
            status = delivery_receive(
                automation_id=automation_id, body=body, headers=headers
            ).status
            statuses[status] = statuses.get(status, 0) + 1
        elapsed = time.perf_counter() - started
    return {"deliveries": count, "seconds": elapsed, "per_second": count / elapsed,
            "statuses": statuses, "ok": statuses == {EXPECTED[kind]: count}}  # fmt: skip


def _over_http(base: str, kind: str, count: int) -> dict[str, Any]:
    automations = _automations(kind, count)
    requests = [_request(kind, a, i) for i, a in enumerate(automations)]
    jobs = list(zip(automations, requests, strict=True))
    statuses: dict[int, int] = {}
    lock = threading.Lock()
    parts = urlsplit(base)

    def client(share: list) -> None:
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        try:
            for (automation_id, _), (body, headers) in share:
                connection.request("POST", f"/hooks/{automation_id}", body=body, headers=headers)
                response = connection.getresponse()
                response.read()
                with lock:
                    statuses[response.status] = statuses.get(response.status, 0) + 1
        finally:
            connection.close()

    threads = [threading.Thread(target=client, args=(jobs[i::THREADS],)) for i in range(THREADS)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    elapsed = time.perf_counter() - started
    return {"deliveries": count, "seconds": elapsed, "per_second": count / elapsed,
            "statuses": statuses, "ok": statuses == {EXPECTED[kind]: count}}  # fmt: skip


def _purge_broker() -> None:
    from canvas.celery import app

    app.control.purge()


def main() -> None:
    options = common.arg_parser(__doc__.splitlines()[0]).parse_args()
    extra = {"CANVAS_WEBHOOK_RATE_PER_MINUTE": RATE,
             "SECRET_KEY": os.environ.get("SECRET_KEY", "bench-only-not-a-secret")}  # fmt: skip
    common.setup_django(extra)
    count = QUICK_DELIVERIES if options.quick else DELIVERIES
    result: dict[str, Any] = {"in_process": {}, "http": {}}
    for kind in KINDS:
        _in_process(kind, max(5, count // 10))  # warm-up: imports, connections, caches
        result["in_process"][kind] = _in_process(kind, count)
    with common.serving("webhooks-server.log", extra) as (
        base, _server,
    ):  # fmt: skip
        try:
            for kind in KINDS:
                _over_http(base, kind, max(5, count // 10))
                result["http"][kind] = _over_http(base, kind, count)
        finally:
            _purge_broker()
            if not all(result["http"].get(k, {}).get("ok", True) for k in KINDS):
                log = common.scratch_dir() / "webhooks-server.log"
                print(f"unexpected answers; the server's log ends:\n{log.read_text()[-6000:]}")
    for where in ("in_process", "http"):
        runs = result[where]
        runs["accepted_over_refused_cost"] = (
            runs["refused"]["per_second"] / runs["accepted"]["per_second"]
        )
        print(
            f"{where}: refused {runs['refused']['per_second']:.0f}/s, ignored "
            f"{runs['ignored']['per_second']:.0f}/s, accepted "
            f"{runs['accepted']['per_second']:.0f}/s (an accepted delivery costs "
            f"{runs['accepted_over_refused_cost']:.1f}x a refused one)"
        )
    result["ok"] = all(r[k]["ok"] for r in (result["in_process"], result["http"]) for k in KINDS)
    result["load_avg"] = os.getloadavg()
    common.write_results(options.json, result)


if __name__ == "__main__":
    main()
