"""Issue 23 §4: a captured GitHub-style delivery replayed with a new `X-GitHub-Delivery` (the
sender's to choose, unsigned) or with its signature re-spaced started a run each time. The
replay key is now the MAC over the body, so each of these starts nothing: exactly one run."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connections
from django.test import Client

from automations.models import AutomationRun
from automations.services import automation_create
from automations.signatures import (
    SignatureError,
    sign_github,
    sign_timestamped,
    signature_verify,
)
from conversations.models import Conversation
from tests.automations.conftest import PULL_REQUEST_OPENED, TEMPLATE, github_post

pytestmark = pytest.mark.django_db

BODY = json.dumps(PULL_REQUEST_OPENED).encode()


@pytest.fixture
def hook(user, team, dispatched):
    """alice's GitHub-style webhook automation (the scripted model) and its secret."""
    made = automation_create(by=user, team=team, name="pr-review", trigger="webhook",
                             prompt_template=TEMPLATE, model="scripted")  # fmt: skip
    return made.automation, made.secret


def _respaced(signature: str) -> list[str]:
    digest = signature.removeprefix("sha256=")
    return [f"sha256= {digest}", f"sha256={digest} ", f"  sha256=\t{digest}",
            f"sha256={digest.upper()}", f"SHA256={digest}"]  # fmt: skip


def test_a_replay_with_a_new_delivery_id_or_a_respaced_signature_starts_nothing(hook):
    automation, secret = hook
    signature = sign_github(secret, BODY)
    first = github_post(Client(), automation.pk, secret, None, body=BODY, delivery="d-1")
    assert first.status_code == 202, first.content
    replays = [
        github_post(Client(), automation.pk, secret, None, body=BODY, delivery=f"new-{i}")
        for i in range(3)
    ] + [github_post(Client(), automation.pk, secret, None, body=BODY, delivery=None)]
    replays += [
        github_post(
            Client(),
            automation.pk,
            secret,
            None,
            body=BODY,
            delivery=f"spaced-{i}",
            signature=spaced,
        )  # fmt: skip
        for i, spaced in enumerate(_respaced(signature))
    ]
    for replay in replays:
        assert replay.status_code == 200, replay.content
        assert replay.json() == {"status": "duplicate", "run_id": first.json()["run_id"]}
    assert AutomationRun.objects.count() == 1 and Conversation.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_replays_with_new_ids_still_make_one_run(hook):
    """The database's unique (automation, delivery_key) decides, not a check before it."""
    automation, secret = hook

    def post(i: int) -> int:
        try:
            return github_post(Client(), automation.pk, secret, None, body=BODY,
                               delivery=f"race-{i}").status_code  # fmt: skip
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=6) as pool:
        statuses = sorted(pool.map(post, range(12)))
    assert statuses.count(202) == 1 and set(statuses) == {200, 202}
    assert AutomationRun.objects.filter(automation=automation).count() == 1


def test_a_new_body_is_a_new_delivery(hook):
    automation, secret = hook
    assert github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED).status_code == 202
    other = {**PULL_REQUEST_OPENED, "number": 43}
    second = github_post(Client(), automation.pk, secret, other, delivery="d-1")
    assert second.json()["status"] == "skipped"  # recorded: the first run still goes (skip)
    assert AutomationRun.objects.count() == 2


@pytest.mark.parametrize(
    "value",
    ["sha256=sha256=" + "0" * 64, "sha256=" + "0" * 63, "sha256=" + "g" * 64, "sha256" + "0" * 64,
     "=" + "0" * 64, "sha1=" + "0" * 40, "", "sha256=ünïcödé"],
    ids=["twice", "short", "not-hex", "no-equals", "no-scheme", "sha1", "empty", "unicode"],
)  # fmt: skip
def test_a_malformed_signature_header_is_a_clear_401(hook, value):
    automation, secret = hook
    with pytest.raises(SignatureError, match="must be sha256=<64 hex digits>"):
        signature_verify(secret=secret, body=BODY, headers={"X-Hub-Signature-256": value}, now=0)
    response = Client().post(f"/hooks/{automation.pk}", data=BODY, content_type="application/json",
                             headers={"X-Hub-Signature-256": value})  # fmt: skip
    assert response.status_code == 401
    assert response.json() == {
        "error": "unauthorized", "detail": "X-Hub-Signature-256 must be sha256=<64 hex digits>.",
    }  # fmt: skip
    assert not AutomationRun.objects.exists()


def test_the_timestamped_style_keys_by_the_mac_too_whatever_the_spacing(hook):
    automation, secret = hook
    at = int(time.time())
    header = sign_timestamped(secret, BODY, at)
    digest = header.split("v1=")[1]
    variants = [header, f" t={at} , v1= {digest.upper()} ", f"t={at},v1={'0' * 64},v1={digest}"]
    statuses = [
        Client().post(f"/hooks/{automation.pk}", data=BODY, content_type="application/json",
                      headers={"X-Canvas-Signature": v}).status_code
        for v in variants
    ]  # fmt: skip
    assert statuses == [202, 200, 200] and AutomationRun.objects.count() == 1
