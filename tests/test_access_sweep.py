"""Every route, enumerated from the URL resolver: another team's ids answer 404 and change
nothing; a viewer's writes are refused. New routes are swept automatically, and a route with
an id this sweep does not know how to fill fails loudly until it is taught."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from django.apps import apps
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from automations.models import AutomationRun
from automations.services import automation_create
from conversations import store
from conversations.events import ActionEvent, Status, StatusChangeEvent, UserMessageEvent
from orchestration.mcp.servers import mcp_server_create
from teams.hooks import hook_create
from teams.models import ApiToken, Membership
from teams.secrets import secret_create
from teams.services import invitation_create, member_add
from teams.tokens import api_token_create
from tests.factories import make_conversation

pytestmark = pytest.mark.django_db

METHODS = ("get", "post", "put", "patch", "delete")
WRITES = ("post", "put", "patch", "delete")
SKIP_PREFIXES = ("admin/", "static/")
"""Django admin has its own staff checks; static files are public."""
PUBLIC = {"login/", "logout/", "api/openapi.json", "api/docs", "hooks/<int:automation_id>"}
"""The webhook endpoint answers by the sender's signature, not by a session
(tests/automations/test_webhooks.py covers its refusals)."""
PERSONAL_WRITES = {"teams/<int:team_id>/leave", "teams/<int:team_id>/default"}
"""A viewer may leave a team or make it their default: those change only their own standing."""


def routes(resolver: URLResolver | None = None, prefix: str = "") -> Iterator[str]:
    for entry in (resolver or get_resolver()).url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from routes(entry, route)
        elif isinstance(entry, URLPattern):
            yield route


def concrete(route: str, values: dict[str, str]) -> str:
    route = route.lstrip("^").rstrip("$")

    def fill(match: re.Match) -> str:
        name = match.group("name")
        if name not in values:
            raise AssertionError(f"the access sweep does not know how to fill <{name}> in {route}")
        return values[name]

    url = re.sub(r"<(?:\w+:)?(?P<name>\w+)>", fill, route)
    url = re.sub(r"\(\?P<(?P<name>\w+)>[^)]*\)", fill, url)
    return "/" + url


@pytest.fixture
def team_a(user, django_user_model, dispatched):
    """alice's team with one of everything in it."""
    membership = Membership.objects.get(user=user)
    team = membership.team
    conversation = make_conversation(user, team)
    store.append(conversation.pk, [UserMessageEvent(text="private")])
    secret_create(by=user, team=team, name="API_KEY", value="s3cr3t-value-abc", description="")
    token, _ = api_token_create(user=user, name="alice's")
    held = ActionEvent(
        tool_call_id="c1", tool="terminal", arguments='{"command": "sudo true"}',
        requires_confirmation=True, risk="HIGH",
    )  # fmt: skip
    store.append(
        conversation.pk,
        [held, StatusChangeEvent(status=Status.WAITING_FOR_CONFIRMATION, reason="held")],
    )
    hook = hook_create(by=user, team=team, name="audit", event="Stop", command="true")
    mcp_server_create(by=user, team=team, name="API_KEY", transport="stdio", command="true")
    automation = automation_create(
        by=user, team=team, name="nightly", trigger="webhook", prompt_template="private"
    ).automation
    run = AutomationRun.objects.create(
        automation=automation, trigger="webhook", delivery_key="d-1", status="failed",
        prompt="private",
    )  # fmt: skip
    viewer = django_user_model.objects.create_user("victor", password="victor-password-1")
    member_add(by=user, team=team, username="victor", role="viewer")
    # Addressed to neither the viewer nor the other team: accepting it is someone else's call.
    invitation = invitation_create(by=user, team=team, username="ivy", role="member")
    return {
        "team": team,
        "viewer": viewer,
        "values": {
            "conversation_id": str(conversation.pk),
            "team_id": str(team.pk),
            "username": "alice",
            "token_id": str(token.pk),
            "hook_id": str(hook.pk),
            "name": "API_KEY",
            "rest": "nothing/here",
            "action_id": held.id,
            "invitation_id": str(invitation.pk),
            "seq": "2",
            "check_id": "no-such-check",
            "automation_id": str(automation.pk),
            "run_id": str(run.pk),
        },
    }


BODY = {
    "text": "hello", "prompt": "hello", "username": "mallory", "role": "member",
    "name": "NEW_NAME", "value": "new-value", "description": "d", "model": "openai/x",
    "reason": "r", "event": "Stop", "command": "true", "url": "https://example.com/notify",
    "model_titles": True, "trigger": "webhook", "prompt_template": "p", "body": "b",
}  # fmt: skip
"""One body that is valid for every write route, so refusals are about access, not input."""


def request(client: Client, method: str, url: str):
    if method == "get":
        return client.get(url)
    if url.startswith("/api/"):
        return getattr(client, method)(url, data=BODY, content_type="application/json")
    return getattr(client, method)(url, data=BODY)


def snapshot() -> dict[str, tuple[int, int]]:
    """Row count and highest id of every table of ours: any write shows up here."""
    state = {}
    for label in ("conversations", "teams", "auth", "automations", "skills"):
        for model in apps.get_app_config(label).get_models():
            rows = model.objects.all()
            state[model._meta.label] = (
                rows.count(),
                max(rows.values_list("pk", flat=True), default=0)
                if model._meta.pk.get_internal_type() != "UUIDField"
                else 0,
            )
    state["updated"] = tuple(
        sorted(str(v) for v in Membership.objects.values_list("role", flat=True))
    )
    return state


def sweep_urls(values: dict[str, str]) -> list[str]:
    urls = []
    for route in routes():
        if (
            route.startswith(SKIP_PREFIXES)
            or route in PUBLIC
            or "<" not in route
            and "(?P" not in route
        ):
            continue
        urls.append((route, concrete(route, values)))
    return urls


def test_another_team_gets_404_everywhere_and_nothing_changes(team_a, other_user):
    urls = sweep_urls(team_a["values"])
    assert len(urls) >= 20  # the sweep really sees the routes
    browser = Client()
    browser.force_login(other_user)
    api = Client(headers={"Authorization": f"Bearer {api_token_create(user=other_user)[1]}"})
    before = snapshot()
    failures = []
    for route, url in urls:
        for client in (browser, api) if url.startswith("/api/") else (browser,):
            for method in METHODS:
                response = request(client, method, url)
                if response.status_code not in (404, 405):
                    failures.append(f"{method.upper()} {url} ({route}) -> {response.status_code}")
                body = response.content.decode(errors="replace")
                assert "private" not in body and "s3cr3t-value-abc" not in body, url
    assert failures == []
    assert snapshot() == before


def test_viewers_are_refused_every_write(team_a):
    viewer = team_a["viewer"]
    browser = Client()
    browser.force_login(viewer)
    api = Client(headers={"Authorization": f"Bearer {api_token_create(user=viewer)[1]}"})
    before = snapshot()
    failures = []
    for route, url in sweep_urls(team_a["values"]):
        if route in PERSONAL_WRITES:
            continue
        for client in (browser, api) if url.startswith("/api/") else (browser,):
            for method in WRITES:
                response = request(client, method, url)
                # 403: the role; 404: another user's own thing (a token); 405: no such method.
                if response.status_code not in (403, 404, 405):
                    failures.append(f"{method.upper()} {url} ({route}) -> {response.status_code}")
    assert failures == []
    assert snapshot() == before
    assert ApiToken.objects.filter(user=viewer).count() == 1
