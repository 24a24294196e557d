"""What a team's own ACP profile may grant its agent, bounded by the site: a network of
CANVAS_ACP_TEAM_NETWORKS ("none" and "outbound" by default) and read-only paths inside
CANVAS_ACP_TEAM_READONLY_PATHS (none by default). A refusal names its field (the API's 400,
the page's form error); a team profile reaches a fake model on 127.0.0.1 through the outbound
guard only where the site lists that range, and is answered 403 by the guard otherwise.
"""

from __future__ import annotations

import http.server
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.urls import reverse

from acp_bridge.team_profiles import acp_agent_create
from conversations.events import AgentErrorEvent, AgentMessageEvent
from orchestration import services
from teams.models import AcpAgentProfile
from tests.acp_bridge.turns import of
from tests.api import call
from tests.runs import drive

MODEL_AGENT = str(Path(__file__).with_name("model_agent.py"))
AGENT_VIEW = [sys.prefix, sys.base_prefix, str(Path(MODEL_AGENT).parent)]
"""What the agent needs to see: the venv, its interpreter, the agent's folder."""


def _url(team, name: str = "") -> str:
    return f"/api/teams/{team.pk}/acp-agents" + (f"/{name}" if name else "")


def _field_error(answer: dict) -> tuple[str, str]:
    [detail] = answer["detail"]
    return detail["field"], detail["message"]


# ---- the API and the page: refusals name the field -------------------------------------------


@pytest.mark.django_db
def test_a_team_profile_keeps_its_network_and_readonly(api, team, settings):
    settings.CANVAS_ACP_TEAM_READONLY_PATHS = [sys.base_prefix]
    body = {"name": "mine", "command": "my-agent", "readonly": [sys.base_prefix]}
    status, answer = call(api, "post", _url(team), body)
    assert status == 201, answer
    # No network given: the guarded internet, which the site lets teams grant by default.
    assert (answer["network"], answer["readonly"]) == ("outbound", [sys.base_prefix])
    row = AcpAgentProfile.objects.get(team=team, name="mine")
    assert (row.network, row.readonly) == ("outbound", [sys.base_prefix])
    status, answer = call(api, "put", _url(team, "mine"), {"command": "x", "network": "none"})
    assert status == 200 and answer["network"] == "none" and answer["readonly"] == []
    # A row replacing a preset keeps a way to its model.
    status, answer = call(api, "post", _url(team), {"name": "codex", "command": "codex-acp"})
    assert status == 201 and answer["network"] == "outbound" and answer["replaces"] == "preset"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"network": "host"}, "network", "CANVAS_ACP_TEAM_NETWORKS allows none, outbound"),
        ({"readonly": ["/opt/agents"]}, "readonly", "the site names no folder"),
        ({"readonly": ["/etc"]}, "readonly", "inside /etc, which no sandbox sees"),
        ({"readonly": ["relative"]}, "readonly", "must be absolute"),
    ],
)
def test_a_grant_beyond_the_sites_is_a_400_naming_the_field(api, team, fields, field, says):
    status, answer = call(api, "post", _url(team), {"name": "x", "command": "a", **fields})
    assert status == 400 and answer["error"] == "invalid_input", answer
    assert _field_error(answer)[0] == field and says in _field_error(answer)[1], answer
    assert not AcpAgentProfile.objects.exists()


@pytest.mark.django_db
def test_a_path_outside_the_sites_folders_or_linking_out_is_refused(api, team, settings, tmp_path):
    allowed = tmp_path / "agents"
    (allowed / "bin").mkdir(parents=True)
    (allowed / "out").symlink_to("/usr")
    settings.CANVAS_ACP_TEAM_READONLY_PATHS = [str(allowed)]
    ok = call(
        api, "post", _url(team), {"name": "a", "command": "a", "readonly": [str(allowed / "bin")]}
    )
    assert ok[0] == 201, ok
    for path in (str(tmp_path), str(allowed / "out")):
        status, answer = call(
            api, "post", _url(team), {"name": "b", "command": "b", "readonly": [path]}
        )
        assert status == 400 and _field_error(answer)[0] == "readonly", answer
    settings.CANVAS_ACP_TEAM_NETWORKS = ["none", "outbound", "host"]
    status, answer = call(api, "put", _url(team, "a"), {"command": "a", "network": "host"})
    assert status == 200 and answer["network"] == "host"


@pytest.mark.django_db
def test_the_page_shows_a_refused_grant_under_its_field(browser, team):
    form = {
        "name": "mine", "command": "my-agent", "args": "", "env": "", "secret_env": "",
        "allowed_secrets": "", "default_mode": "", "idle_timeout_seconds": "300",
        "turn_timeout_seconds": "1800", "network": "outbound", "readonly": "/opt/agents",
    }  # fmt: skip
    url = reverse("team-acp-agent-create", args=[team.pk])
    response = browser.post(url, form, HTTP_HX_REQUEST="true")
    page = response.content.decode()
    assert response.status_code == 400
    field = page[page.index('name="readonly"') - 600 : page.index('name="readonly"') + 400]
    assert "CANVAS_ACP_TEAM_READONLY_PATHS allows paths none" in field, field
    assert not AcpAgentProfile.objects.exists()
    response = browser.post(url, {**form, "readonly": ""}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "<code>outbound</code>" in response.content.decode()


# ---- a team profile's turn reaches its model through the outbound guard -----------------------


class FakeModel(http.server.BaseHTTPRequestHandler):
    asked: list[dict] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        FakeModel.asked.append(json.loads(self.rfile.read(length)))
        body = b'{"completion": "hello from the fake model"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def fake_model() -> Iterator[str]:
    FakeModel.asked = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/complete"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.acp
@pytest.mark.timeout(120)
@pytest.mark.django_db(transaction=True)
def test_a_team_profile_reaches_its_model_on_loopback_only_through_the_guard(
    user, team, dispatched, settings, fake_model
):
    settings.CANVAS_UNSANDBOXED_COMMANDS = False
    settings.CANVAS_ACP_TEAM_READONLY_PATHS = AGENT_VIEW  # the team's policy stays as it is
    acp_agent_create(
        by=user, team=team, name="modelled", command=sys.executable, args=[MODEL_AGENT],
        env={"MODEL_URL": fake_model}, readonly=AGENT_VIEW,
    )  # fmt: skip
    assert AcpAgentProfile.objects.get(name="modelled").network == "outbound"

    # The host's loopback is refused by the guard unless the site lists it...
    settings.CANVAS_ALLOWED_PRIVATE_NETWORKS = []
    refused = services.conversation_create(
        owner=user, prompt="model first", model="demo", agent="modelled", team=team.pk
    )
    drive(dispatched)
    said = of(refused, AgentMessageEvent)[-1].text
    assert said.startswith("refused 403") and "outbound guard" in said, said
    assert "loopback" in said and FakeModel.asked == []

    # ...and reached through it when the site does, as a model on a private range would be.
    settings.CANVAS_ALLOWED_PRIVATE_NETWORKS = ["127.0.0.1/32"]
    reached = services.conversation_create(
        owner=user, prompt="model second", model="demo", agent="modelled", team=team.pk
    )
    drive(dispatched)
    said = of(reached, AgentMessageEvent)[-1].text
    assert said == 'model: {"completion": "hello from the fake model"}', said
    assert FakeModel.asked == [{"prompt": "second"}]


@pytest.mark.acp
@pytest.mark.django_db(transaction=True)
def test_a_grant_the_site_withdrew_stops_the_turn_naming_the_field(
    user, team, dispatched, settings
):
    settings.CANVAS_ACP_TEAM_READONLY_PATHS = AGENT_VIEW
    acp_agent_create(
        by=user, team=team, name="modelled", command=sys.executable, args=[MODEL_AGENT],
        readonly=AGENT_VIEW,
    )  # fmt: skip
    settings.CANVAS_ACP_TEAM_READONLY_PATHS = []
    conversation = services.conversation_create(
        owner=user, prompt="model x", model="demo", agent="modelled", team=team.pk
    )
    drive(dispatched)
    error = of(conversation, AgentErrorEvent)[-1]
    assert error.code == "acp_start_failed" and '"readonly" path' in error.message, error
