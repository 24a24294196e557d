"""Bad input is a 400 with a message, never a 500: NUL characters (Postgres text cannot hold
one), integers past the database column, overlong strings, at every JSON API route and form.

The fuzzer (test_api_fuzz.py) explores the whole schema; these are the cases an attack review
found, pinned one by one so the exact answer is checked."""

from __future__ import annotations

import re
from urllib.parse import quote, urlencode

import pytest
from django.test import Client

from teams import hooks, profiles
from teams.secrets import secret_create
from tests.api import send
from tests.factories import make_conversation

pytestmark = pytest.mark.django_db

NUL = "a\x00b"
HUGE = 10**19  # past Postgres bigint, and so past every integer column
LONG = "w" * 1000


@pytest.fixture
def world(user, team, api_token) -> dict:
    conversation = make_conversation(user)
    hook = hooks.hook_create(by=user, team=team, name="h", event="Stop", command="true")
    profiles.profile_create(by=user, team=team, name="fast", model="openai/gpt-4o")
    secret_create(by=user, team=team, name="API_KEY", value="v-123456")
    return {"team": team.pk, "conversation": conversation.pk, "hook": hook.pk}


@pytest.fixture
def api(api_token) -> Client:
    return Client(headers={"Authorization": f"Bearer {api_token}"}, raise_request_exception=False)


# (method, url, body): url and body are formatted with the world's ids.
CASES = {
    "prompt": ("post", "/api/conversations", {"prompt": NUL}),
    "title": ("post", "/api/conversations", {"prompt": "p", "title": NUL}),
    "model": ("post", "/api/conversations", {"prompt": "p", "model": NUL}),
    "workspace": ("post", "/api/conversations", {"prompt": "p", "workspace": NUL}),
    "workspace-long": ("post", "/api/conversations", {"prompt": "p", "workspace": LONG + "w"}),
    "tools": ("post", "/api/conversations", {"prompt": "p", "tools": [NUL]}),
    "conversation-team": ("post", "/api/conversations", {"prompt": "p", "team": HUGE}),
    "max_cost_usd": ("post", "/api/conversations", {"prompt": "p", "max_cost_usd": 1e300}),
    "list-team": ("get", f"/api/conversations?team={HUGE}", None),
    "list-offset": ("get", "/api/conversations?offset=" + str(HUGE), None),
    "conversation-id": ("get", "/api/conversations/a%00b", None),
    "events-after_seq": ("get", "/api/conversations/{conversation}/events?after_seq=" + str(HUGE), None),
    "message": ("post", "/api/conversations/{conversation}/messages", {"text": NUL}),
    "run-cost": ("post", "/api/conversations/{conversation}/run", {"max_cost_usd": 1e300}),
    "action-id": ("post", "/api/conversations/{conversation}/actions/a%00b/approve", None),
    "reject-reason": ("post", "/api/conversations/{conversation}/actions/x/reject", {"reason": NUL}),
    "team-name": ("post", "/api/teams", {"name": NUL}),
    "invite-username": ("post", "/api/teams/{team}/invitations", {"username": NUL}),
    "invite-role": ("post", "/api/teams/{team}/invitations", {"username": "x", "role": NUL}),
    "member-path": ("patch", "/api/teams/{team}/members/a%00b", {"role": "member"}),
    "member-delete": ("delete", "/api/teams/{team}/members/a%00b", None),
    "audit-actor": ("get", "/api/teams/{team}/audit?actor=a%00b", None),
    "audit-kind": ("get", "/api/teams/{team}/audit?kind=a%00b", None),
    "audit-offset": ("get", "/api/teams/{team}/audit?offset=" + str(HUGE), None),
    "token-name": ("post", "/api/tokens", {"name": NUL}),
    "secret-name": ("post", "/api/teams/{team}/secrets", {"name": NUL, "value": "value-123456"}),
    "secret-value": ("post", "/api/teams/{team}/secrets", {"name": "B", "value": NUL}),
    "secret-description": (
        "post", "/api/teams/{team}/secrets", {"name": "B", "value": "value-123456", "description": NUL}
    ),
    "secret-path": ("put", "/api/teams/{team}/secrets/a%00b", {"value": "value-123456"}),
    "secret-update": ("put", "/api/teams/{team}/secrets/API_KEY", {"description": NUL}),
    "policy-tools": ("put", "/api/teams/{team}/policy", {"allowed_tools": [NUL]}),
    "policy-kinds": ("put", "/api/teams/{team}/policy", {"allowed_agent_kinds": [NUL]}),
    "policy-concurrent": ("put", "/api/teams/{team}/policy", {"max_concurrent_runs": HUGE}),
    "policy-cost": ("put", "/api/teams/{team}/policy", {"max_cost_per_run_usd": HUGE}),
    "profile-name": ("post", "/api/teams/{team}/profiles", {"name": NUL, "model": "m/x"}),
    "profile-model": ("post", "/api/teams/{team}/profiles", {"name": "p", "model": NUL}),
    "profile-base": (
        "post", "/api/teams/{team}/profiles", {"name": "p", "model": "m/x", "api_base": NUL}
    ),
    "profile-tokens": (
        "post", "/api/teams/{team}/profiles",
        {"name": "p", "model": "m/x", "max_input_tokens": HUGE},
    ),
    "profile-update-tokens": (
        "put", "/api/teams/{team}/profiles/fast", {"model": "m/x", "max_input_tokens": HUGE}
    ),
    "profile-path": ("delete", "/api/teams/{team}/profiles/a%00b", None),
    "hook-command": (
        "post", "/api/teams/{team}/hooks", {"name": "n", "event": "Stop", "command": NUL}
    ),
    "hook-name": ("post", "/api/teams/{team}/hooks", {"name": NUL, "event": "Stop", "command": "c"}),
    "hook-matcher": (
        "post", "/api/teams/{team}/hooks",
        {"name": "n", "event": "Stop", "command": "c", "matcher": NUL},
    ),
    "hook-position": (
        "post", "/api/teams/{team}/hooks",
        {"name": "n", "event": "Stop", "command": "c", "position": HUGE},
    ),
    "hook-timeout": (
        "post", "/api/teams/{team}/hooks",
        {"name": "n", "event": "Stop", "command": "c", "timeout_seconds": HUGE},
    ),
    "hook-update": ("put", "/api/teams/{team}/hooks/{hook}", {"command": NUL}),
    "hook-update-position": ("put", "/api/teams/{team}/hooks/{hook}", {"position": HUGE}),
    "notification-url": ("put", "/api/teams/{team}/notifications", {"url": "https://x/" + NUL}),
}  # fmt: skip


# Out-of-range ids are simply not found; page sizes past the maximum are clamped.
FINE = {
    "team-id": ("get", f"/api/teams/{HUGE}/members", None, 404),
    "token-id": ("delete", f"/api/tokens/{HUGE}", None, 404),
    "hook-id": ("delete", f"/api/teams/{{team}}/hooks/{HUGE}", None, 404),
    "invitation-id": ("post", f"/api/invitations/{HUGE}/accept", None, 404),
    "list-limit": ("get", f"/api/conversations?limit={HUGE}", None, 200),
    "events-limit": ("get", f"/api/conversations/{{conversation}}/events?limit={HUGE}", None, 200),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_a_400_with_a_message(api, world, dispatched, case) -> None:
    method, url, body = CASES[case]
    response = send(api, method, url.format(**world), body)
    assert response.status_code == 400, (response.status_code, response.content[:500])
    answer = response.json()
    assert answer["error"] == "invalid_input" and answer["detail"], answer


def test_a_nul_is_named_in_the_answer(api, world) -> None:
    response = send(api, "post", "/api/conversations", {"prompt": "p", "title": NUL})
    assert response.json()["detail"] == [
        {"field": "title", "message": "Value error, must not contain NUL characters"}
    ]


@pytest.mark.parametrize("case", list(FINE))
def test_out_of_range_numbers_that_mean_nothing_are_answered_plainly(api, world, case) -> None:
    method, url, body, status = FINE[case]
    response = send(api, method, url.format(**world), body)
    assert response.status_code == status, response.content[:500]


# -- the pages' forms ------------------------------------------------------------------------

PAGE_CASES = {
    "prompt": ("/conversations/new", {"prompt": NUL, "model": "demo"}),
    "model": ("/conversations/new", {"prompt": "p", "model": NUL}),
    "workspace": ("/conversations/new", {"prompt": "p", "model": "demo", "workspace": NUL}),
    "workspace-long": (
        "/conversations/new", {"prompt": "p", "model": "demo", "workspace": LONG + "w"}
    ),
    "message": ("/conversations/{conversation}/messages", {"text": NUL}),
    "team-name": ("/teams/new", {"name": NUL}),
    "team-switch": ("/teams/switch", {"team_id": HUGE}),
    "invite": ("/teams/{team}/invitations/new", {"username": NUL, "role": "member"}),
    "member-role": ("/teams/{team}/members/role", {"username": NUL, "role": "member"}),
    "member-remove": ("/teams/{team}/members/remove", {"username": NUL}),
    "token-name": ("/tokens/new", {"name": NUL}),
    "token-days": ("/tokens/new", {"name": "t", "expires_in_days": HUGE}),
    "hook-command": (
        "/teams/{team}/hooks/add",
        {"name": "n", "event": "Stop", "command": NUL, "timeout_seconds": 10},
    ),
    "hook-timeout": (
        "/teams/{team}/hooks/add",
        {"name": "n", "event": "Stop", "command": "c", "timeout_seconds": HUGE},
    ),
    "hook-edit": (
        "/teams/{team}/hooks/{hook}/edit",
        {"name": NUL, "event": "Stop", "command": "c", "timeout_seconds": 10},
    ),
    "notification": ("/teams/{team}/notifications", {"url": "https://x/" + NUL}),
    "reject-reason": ("/conversations/{conversation}/actions/x/reject", {"reason": NUL}),
    "action-id": ("/conversations/{conversation}/actions/a%00b/approve", {}),
}  # fmt: skip


@pytest.fixture
def browser(user) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.mark.parametrize("case", list(PAGE_CASES))
def test_a_page_form_refuses_bad_input_without_a_500(browser, world, dispatched, case) -> None:
    url, data = PAGE_CASES[case]
    response = browser.post(url.format(**world), data, headers={"HX-Request": "true"})
    assert response.status_code < 500, response.content[:500]


@pytest.mark.parametrize(
    "query", [f"?page={HUGE}", "?actor=a%00b", "?kind=a%00b", f"?page=-{HUGE}"]
)
def test_the_audit_page_takes_any_filter(browser, world, query) -> None:
    response = browser.get(f"/teams/{world['team']}/audit/{query}")
    assert response.status_code < 500, response.content[:500]


# -- every field of the schema ---------------------------------------------------------------


def _openapi() -> dict:
    from canvas.api import api as ninja_api

    return ninja_api.get_openapi_schema(path_prefix="/api/")


def _variants(spec: dict) -> list[dict]:
    return spec.get("anyOf", [spec])


def _fields(openapi: dict) -> list[tuple[str, str, str, str, dict]]:
    """(method, path, where, name, schema) for every parameter and top-level body property."""
    out = []
    for path, methods in openapi["paths"].items():
        for method, operation in methods.items():
            for param in operation.get("parameters", []):
                out.append((method, path, param["in"], param["name"], param["schema"]))
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body is not None:
                ref = next(v["$ref"] for v in _variants(body["schema"]) if "$ref" in v)
                name = ref.rsplit("/", 1)[1]
                for prop, spec in openapi["components"]["schemas"][name]["properties"].items():
                    out.append((method, path, "body", prop, spec))
    return out


FIELDS = _fields(_openapi())
STRINGS = [f for f in FIELDS if any(v.get("type") == "string" for v in _variants(f[4]))]
STRING_LISTS = [
    f for f in FIELDS
    if any(v.get("items", {}).get("type") == "string" for v in _variants(f[4]))
]  # fmt: skip
CLAMPED = {"limit"}
"""Page sizes: any integer, clamped to the page maximum before a query sees it."""


def _id(field) -> str:
    method, path, where, name, _ = field
    return f"{method.upper()} {path} {where}:{name}"


def _request(api: Client, world: dict, field, value) -> dict:
    """Sends `value` as that one field; path ids name the world's rows, so a value the schema
    lets through reaches the service."""
    method, path, where, name, _ = field
    fillers = {p: str(world.get(p.removesuffix("_id"), "1" if p.endswith("_id") else "x"))
               for p in re.findall(r"{(\w+)}", path)}  # fmt: skip
    body, headers = None, {}
    if where == "path":
        fillers[name] = quote(value)
    url = path.format(**fillers)
    if where == "query":
        url += "?" + urlencode({name: value})
    elif where == "body":
        body = {name: value}
    elif where == "header":
        headers[name] = value
    if body is None and method in ("post", "put", "patch"):
        body = {}
    response = send(api, method, url, body, headers=headers)
    assert response.status_code == 400, (response.status_code, response.content[:500])
    return response.json()


def _names(answer: dict, name: str) -> list[str]:
    detail = answer["detail"]
    if isinstance(detail, str):
        return [detail]
    return [d["message"] for d in detail if d["field"] and d["field"].split(".")[0] == name]


def _free_text(spec: dict) -> bool:
    """Text, not one of a few fixed values nor a number (those refuse NUL as a wrong value)."""
    variants = _variants(spec)
    if any(v.get("type") == "number" for v in variants):
        return False
    items = [v.get("items", {}) for v in variants if v.get("type") == "array"]
    texts = [v for v in [*variants, *items] if v.get("type") == "string"]
    return any("enum" not in v for v in texts)


@pytest.mark.parametrize("field", STRINGS + STRING_LISTS, ids=_id)
def test_every_string_refuses_nul_by_name(api, world, field) -> None:
    answer = _request(api, world, field, [NUL] if field in STRING_LISTS else NUL)
    messages = _names(answer, field[3])
    assert messages, answer
    if _free_text(field[4]):
        assert any("NUL" in m for m in messages), answer


@pytest.mark.parametrize("field", STRINGS + STRING_LISTS, ids=_id)
def test_every_string_has_an_upper_bound(field) -> None:
    variants = _variants(field[4])
    if any(v.get("type") == "number" for v in variants):
        return  # a decimal, which may be written as text: bounded by its range
    for variant in variants:
        if variant.get("type") == "string":
            assert variant.get("maxLength") or variant.get("enum"), variant
        if variant.get("type") == "array":
            assert variant["items"].get("maxLength") or variant["items"].get("enum"), variant


@pytest.mark.parametrize(
    "field",
    [f for f in FIELDS if f[2] != "path" and f[3] not in CLAMPED
     and any(v.get("type") in ("integer", "number") for v in _variants(f[4]))],
    ids=_id,
)  # fmt: skip
def test_every_number_in_a_query_or_body_is_bounded(api, world, field) -> None:
    numeric = [v for v in _variants(field[4]) if v.get("type") in ("integer", "number")]
    assert all(v.get("maximum") is not None for v in numeric), field
    answer = _request(api, world, field, HUGE)
    assert _names(answer, field[3]), answer
