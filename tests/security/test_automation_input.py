"""Issue 23 §7 (automations and tokens): bad input is a clear 4xx with nothing stored, never a
500, and failure throttles refuse failures only.

- a signed webhook body holding `1e999999` (Infinity) reached Postgres: a 500;
- a 900-deep filter expression raised RecursionError: a 500;
- `allowed_secrets` took a name the team has no secret by;
- after 20 bad API tokens from one address a valid token from it was refused too;
- unsigned or wrongly signed `POST /hooks/{id}` had no rate limit.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from automations import manual
from automations.models import Automation, AutomationRun
from automations.services import automation_create, automation_update
from automations.signatures import sign_github
from common.errors import InvalidInput
from conversations.models import Conversation
from teams.secrets import secret_create, secret_delete
from tests.api import call
from tests.automations.conftest import PULL_REQUEST_OPENED, TEMPLATE, github_post

pytestmark = pytest.mark.django_db

DEEP_FILTER = "(" * 900 + "action" + ")" * 900
API_FIELDS = {"name": "pr-review", "trigger": "webhook", "prompt_template": TEMPLATE,
              "model": "scripted"}  # fmt: skip


@pytest.fixture
def hook(user, team, dispatched):
    made = automation_create(by=user, team=team, **API_FIELDS)
    return made.automation, made.secret


def _api_url(team, *rest) -> str:
    return "/".join([f"/api/teams/{team.pk}/automations", *map(str, rest)])


# ---- Non-finite numbers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [b'{"n": 1e999999}', b'{"n": -1e999}', b'{"a": [{"n": 1E400}]}', b'{"n": NaN}',
     b'{"n": Infinity}', b'{"n": -Infinity}'],
    ids=["1e999999", "-1e999", "nested", "NaN", "Infinity", "-Infinity"],
)  # fmt: skip
def test_a_signed_body_with_a_non_finite_number_is_400_and_nothing_is_stored(hook, body):
    automation, secret = hook
    response = github_post(Client(), automation.pk, secret, None, body=body)
    assert response.status_code == 400, response.content
    assert response.json() == {
        "error": "invalid_input",
        "detail": "the payload must hold finite numbers only (not NaN, Infinity or 1e999).",
    }
    assert not AutomationRun.objects.exists() and not Conversation.objects.exists()


def test_run_now_with_a_non_finite_payload_is_400_too(user, team, hook, api):
    automation, _ = hook
    with pytest.raises(InvalidInput, match="finite numbers only"):
        manual.run_now(by=user, team=team, automation_id=automation.pk,
                       payload={"n": float("inf")})  # fmt: skip
    response = api.post(_api_url(team, automation.pk, "runs"), data=b'{"payload": {"n": 1e999}}',
                        content_type="application/json")  # fmt: skip
    assert response.status_code == 400 and "finite numbers only" in response.content.decode()
    assert not AutomationRun.objects.exists()


# ---- Deep filters ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    [DEEP_FILTER, "[" * 600 + "a" + "]" * 600, "!" * 1500 + "a", "a" + "|b" * 900,
     "`" + "[" * 900 + "]" * 900 + "`"],
    ids=["parens", "brackets", "nots", "pipes", "literal"],
)  # fmt: skip
def test_a_deep_filter_is_400_on_save_by_api_and_form(api, browser, team, expression):
    status, body = call(api, "post", _api_url(team), {**API_FIELDS, "filter": expression})
    assert status == 400, body
    assert body["error"] == "invalid_input" and "the filter nests deeper than 64" in body["detail"]
    fields = {"name": "pr-review", "trigger": "webhook", "timezone": "UTC", "missed": "skip",
              "prompt_template": TEMPLATE, "filter": expression, "model": "scripted",
              "concurrency": "skip", "deadline_minutes": "30"}  # fmt: skip
    page = browser.post(reverse("team-automation-create", args=[team.pk]), fields,
                        HTTP_HX_REQUEST="true")  # fmt: skip
    assert page.status_code == 400 and "the filter nests deeper than 64" in page.content.decode()
    assert not Automation.objects.exists()


def test_a_deep_filter_stored_before_the_bound_fails_its_run_without_a_crash(hook):
    automation, secret = hook
    Automation.objects.filter(pk=automation.pk).update(filter="a" + "|b" * 900)
    response = github_post(Client(), automation.pk, secret, PULL_REQUEST_OPENED)
    assert response.status_code == 422, response.content
    run = AutomationRun.objects.get()
    assert run.status == "failed" and "nests deeper than 64" in run.error
    assert not Conversation.objects.exists()


def test_an_ordinary_filter_still_saves_and_runs(api, team, dispatched):
    expression = "action == 'opened' && contains(pull_request.labels[].name, 'ci')"
    status, body = call(api, "post", _api_url(team), {**API_FIELDS, "filter": expression})
    assert status == 201, body
    response = github_post(Client(), body["id"], body["webhook_secret"], PULL_REQUEST_OPENED)
    assert response.status_code == 202


# ---- allowed_secrets -------------------------------------------------------------------------


def test_an_allowed_secret_the_team_lacks_is_400_naming_it(api, browser, user, team):
    secret_create(by=user, team=team, name="MY_TOKEN", value="mine-value-1234")
    status, body = call(api, "post", _api_url(team),
                        {**API_FIELDS, "allowed_secrets": ["MY_TOKEN", "NOT_A_SECRET"]})  # fmt: skip
    assert status == 400
    assert body == {"error": "invalid_input",
                    "detail": "allowed_secrets: the team has no secret named 'NOT_A_SECRET'."}  # fmt: skip
    fields = {"name": "pr-review", "trigger": "webhook", "timezone": "UTC", "missed": "skip",
              "prompt_template": TEMPLATE, "model": "scripted", "concurrency": "skip",
              "deadline_minutes": "30", "allowed_secrets": ["MY_TOKEN", "NOT_A_SECRET"]}  # fmt: skip
    page = browser.post(reverse("team-automation-create", args=[team.pk]), fields,
                        HTTP_HX_REQUEST="true")  # fmt: skip
    assert page.status_code == 400
    assert "the team has no secret named &#x27;NOT_A_SECRET&#x27;" in page.content.decode()
    assert not Automation.objects.exists()

    status, made = call(
        api, "post", _api_url(team), {**API_FIELDS, "allowed_secrets": ["MY_TOKEN"]}
    )
    assert status == 201, made
    status, body = call(api, "put", _api_url(team, made["id"]),
                        {"allowed_secrets": ["MY_TOKEN", "OTHER"]})  # fmt: skip
    assert status == 400 and "no secret named 'OTHER'" in body["detail"]
    assert Automation.objects.get().allowed_secrets == ["MY_TOKEN"]


def test_a_secret_deleted_later_does_not_block_other_edits(user, team):
    secret_create(by=user, team=team, name="GONE_SOON", value="gone-value-1234")
    made = automation_create(by=user, team=team, **API_FIELDS, allowed_secrets=["GONE_SOON"])
    secret_delete(by=user, team=team, name="GONE_SOON")
    changed = automation_update(by=user, team=team, automation_id=made.automation.pk,
                                enabled=False)  # fmt: skip
    assert changed.allowed_secrets == ["GONE_SOON"] and changed.enabled is False


# ---- API tokens: failures are throttled, good tokens are not ---------------------------------


def _get(token: str, address: str):
    return Client(REMOTE_ADDR=address).get(
        "/api/conversations", headers={"Authorization": f"Bearer {token}"}
    )


def test_a_valid_token_is_accepted_from_an_address_blocked_for_bad_ones(user, api_token):
    address = "203.0.113.50"
    statuses = [_get(f"cnv_bad-{i}", address).status_code for i in range(25)]
    assert statuses[:20] == [401] * 20 and set(statuses[20:]) == {429}
    assert _get(api_token, address).status_code == 200
    blocked = _get("cnv_still-bad", address)  # the block still holds for bad ones
    assert blocked.status_code == 429 and int(blocked["Retry-After"]) >= 1


# ---- POST /hooks/{id}: failures are throttled, signed deliveries are not ---------------------


def _forged(automation_id: int, address: str, signature: str | None = "sha256=" + "0" * 64):
    headers = {"X-Hub-Signature-256": signature} if signature else {}
    return Client(REMOTE_ADDR=address).post(
        f"/hooks/{automation_id}", data=b'{"action": "opened"}', content_type="application/json",
        headers=headers,
    )  # fmt: skip


def _signed(automation_id: int, secret: str, address: str, number: int):
    body = json.dumps({**PULL_REQUEST_OPENED, "number": number}).encode()
    return Client(REMOTE_ADDR=address).post(
        f"/hooks/{automation_id}", data=body, content_type="application/json",
        headers={"X-Hub-Signature-256": sign_github(secret, body)},
    )  # fmt: skip


def test_a_flood_of_bad_deliveries_from_one_address_gets_429_and_good_senders_still_get_in(
    hook, settings
):
    settings.CANVAS_WEBHOOK_RATE_PER_MINUTE = 1000
    automation, secret = hook
    flood = "198.51.100.66"
    statuses = [_forged(automation.pk, flood, None if i % 2 else "sha256=" + "0" * 64).status_code
                for i in range(40)]  # fmt: skip
    assert statuses[:20] == [401] * 20 and set(statuses[20:]) == {429}
    throttled = _forged(automation.pk, flood)
    assert 1 <= int(throttled["Retry-After"]) <= 300
    assert throttled.json()["error"] == "throttled"
    # Another webhook id from the flooding address: 429 too, not 404.
    assert _forged(automation.pk + 1000, flood).status_code == 429
    # The real sender, from another address or even from the flooding one, is not starved.
    assert _signed(automation.pk, secret, "192.0.2.10", 1).status_code == 202
    assert _signed(automation.pk, secret, flood, 2).status_code in (200, 202)
    assert AutomationRun.objects.count() == 2


def test_a_flood_from_many_addresses_blocks_bad_deliveries_to_the_automation_only(hook, settings):
    settings.CANVAS_WEBHOOK_FAILURE_LIMIT = 5
    automation, secret = hook
    statuses = [_forged(automation.pk, f"198.51.100.{i}").status_code for i in range(8)]
    assert statuses == [401] * 5 + [429] * 3  # each address once: the automation's count
    assert "for this webhook" in _forged(automation.pk, "198.51.100.200").json()["detail"]
    assert _signed(automation.pk, secret, "198.51.100.201", 1).status_code == 202


def test_unknown_webhook_ids_count_against_the_address(hook, settings):
    settings.CANVAS_WEBHOOK_FAILURE_LIMIT = 3
    automation, _ = hook
    scanner = "198.51.100.77"
    statuses = [_forged(automation.pk + 1000 + i, scanner).status_code for i in range(5)]
    assert statuses == [404] * 3 + [429] * 2
    assert _forged(automation.pk + 5000, "192.0.2.99").status_code == 404  # others: unaffected
