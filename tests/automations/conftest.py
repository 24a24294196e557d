"""Automations' fixtures: an automation made through the service, and signed deliveries."""

from __future__ import annotations

import json
import time

import pytest
from django.test import Client

from automations import services
from automations.signatures import sign_github, sign_timestamped
from automations.templating import PAYLOAD_NOTE

PULL_REQUEST_OPENED = {
    "action": "opened",
    "number": 42,
    "pull_request": {
        "number": 42,
        "title": "Fix the flaky login test",
        "html_url": "https://github.com/acme/web/pull/42",
        "user": {"login": "octocat"},
        "head": {"ref": "fix-login", "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e"},
        "base": {"ref": "main"},
        "labels": [{"name": "tests"}, {"name": "ci"}],
    },
    "repository": {"full_name": "acme/web"},
    "sender": {"login": "octocat"},
}

TEMPLATE = (
    "Review {{ payload.repository.full_name }}#{{ payload.pull_request.number }} "
    "({{ payload.pull_request.title }}) by {{ payload.pull_request.user.login }}, "
    "first label {{ payload.pull_request.labels.0.name }}."
)
RENDERED = (
    "Review <untrusted_payload>acme/web</untrusted_payload>#<untrusted_payload>42"
    "</untrusted_payload> (<untrusted_payload>Fix the flaky login test</untrusted_payload>) by "
    "<untrusted_payload>octocat</untrusted_payload>, first label "
    "<untrusted_payload>tests</untrusted_payload>." + PAYLOAD_NOTE
)
"""The payload's values quoted as untrusted, the template's own words as they are."""


@pytest.fixture
def make_automation(user, team):
    """Make one of alice's automations: (automation, its webhook secret)."""

    def make(**fields):
        given = {"name": "pr-review", "trigger": "webhook", "prompt_template": TEMPLATE,
                 "model": "scripted", **fields}  # fmt: skip
        made = services.automation_create(by=user, team=team, **given)
        return made.automation, made.secret

    return make


def github_post(client: Client, automation_id: int, secret: str, payload, *, delivery="d-1",
                signature: str | None = None, body: bytes | None = None):  # fmt: skip
    body = json.dumps(payload).encode() if body is None else body
    headers = {"X-Hub-Signature-256": signature or sign_github(secret, body),
               "X-GitHub-Event": "pull_request"}  # fmt: skip
    if delivery is not None:
        headers["X-GitHub-Delivery"] = delivery
    return client.post(f"/hooks/{automation_id}", data=body, content_type="application/json",
                       headers=headers)  # fmt: skip


def timestamped_post(client: Client, automation_id: int, secret: str, payload, *,
                     at: int | None = None, signature: str | None = None):  # fmt: skip
    body = json.dumps(payload).encode()
    at = int(time.time()) if at is None else at
    headers = {"X-Canvas-Signature": signature or sign_timestamped(secret, body, at)}
    return client.post(f"/hooks/{automation_id}", data=body, content_type="application/json",
                       headers=headers)  # fmt: skip
