"""An automation's allowed_secrets bound what its run may use: the others do not exist for
its tools or its external agent (and are still redacted wherever they turn up)."""

from __future__ import annotations

import json

import pytest

from acp_bridge.profiles import AcpProfile, SecretRef
from automations import manual
from conversations import store
from conversations.events import ObservationEvent
from orchestration.external.environment import agent_environment
from orchestration.tools.base import team_secrets
from teams.secrets import secret_create
from tests.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)

COMMAND = 'echo "mine=${MY_TOKEN:-unset} other=${OTHER_TOKEN:-unset}"'


@pytest.fixture
def two_secrets(user, team) -> None:
    secret_create(by=user, team=team, name="MY_TOKEN", value="mine-value-1234", description="")
    secret_create(by=user, team=team, name="OTHER_TOKEN", value="other-value-5678",
                  description="")  # fmt: skip


def _terminal_output(conversation_id) -> str:
    (observation,) = [
        s.event for s in store.load(conversation_id)
        if isinstance(s.event, ObservationEvent) and s.event.tool == "terminal"
    ]  # fmt: skip
    return observation.content


@pytest.mark.parametrize(
    ("allowed", "expected"),
    [
        (["MY_TOKEN"], "mine=<secret:MY_TOKEN> other=unset"),
        ([], "mine=unset other=unset"),
        (["MY_TOKEN", "OTHER_TOKEN"], "mine=<secret:MY_TOKEN> other=<secret:OTHER_TOKEN>"),
    ],
)
def test_a_run_uses_only_the_secrets_its_automation_allows(
    user, team, two_secrets, make_automation, dispatched, allowed, expected
):
    prompt = json.dumps({"script": [
        {"tool": "terminal", "args": {"command": COMMAND, "security_risk": "LOW"}},
        {"tool": "finish", "args": {"message": "done"}},
    ]})  # fmt: skip
    automation, _ = make_automation(prompt_template=prompt, allowed_secrets=allowed)
    run = manual.run_now(by=user, team=team, automation_id=automation.pk).run
    assert run.conversation.secret_names == sorted(allowed)
    drive(dispatched)
    assert expected in _terminal_output(run.conversation_id)


def test_conversations_people_start_keep_every_team_secret(team, two_secrets):
    assert set(team_secrets(team.pk)) == {"MY_TOKEN", "OTHER_TOKEN"}
    assert set(team_secrets(team.pk, only=["OTHER_TOKEN", "GONE"])) == {"OTHER_TOKEN"}


def test_an_external_agent_sees_only_the_allowed_secrets(team, two_secrets):
    profile = AcpProfile(name="probe", command="/bin/true", secrets=("MY_TOKEN", "OTHER_TOKEN"),
                         team_id=team.pk)  # fmt: skip
    narrowed = agent_environment(profile, team.pk, only=["MY_TOKEN"])
    assert narrowed.env["MY_TOKEN"] == "mine-value-1234" and "OTHER_TOKEN" not in narrowed.env
    assert narrowed.missing == ("OTHER_TOKEN",)
    by_reference = AcpProfile(name="probe", command="/bin/true", team_id=team.pk,
                              env={"KEY": SecretRef("OTHER_TOKEN")})  # fmt: skip
    refused = agent_environment(by_reference, team.pk, only=["MY_TOKEN"])
    assert refused.error is not None and "OTHER_TOKEN" in refused.error
