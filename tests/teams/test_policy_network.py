"""The team policy's network for sandboxed commands: stricter wins, and "host" only where the
site allows it."""

from __future__ import annotations

import pytest

from common.errors import InvalidInput
from teams.models import AuditRecord, Policy
from teams.policies import EffectivePolicy, effective_from_rows, policy_for_team, policy_update
from tests.api import client_for, send

pytestmark = pytest.mark.django_db


def test_no_network_unless_every_row_says_host():
    assert EffectivePolicy().network == "none"
    host, none = Policy(network="host"), Policy(network="none")
    assert effective_from_rows([host]).network == "host"
    assert effective_from_rows([host, none]).network == "none"
    assert effective_from_rows([none, host]).network == "none"


def test_host_is_refused_at_save_time_unless_the_site_allows_it(user, team, settings):
    settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK = False
    with pytest.raises(InvalidInput, match="CANVAS_SANDBOX_ALLOW_HOST_NETWORK"):
        policy_update(by=user, team=team, network="host")
    assert not Policy.objects.exists()
    with pytest.raises(InvalidInput, match="network must be one of"):
        policy_update(by=user, team=team, network="internet")
    settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK = True
    policy_update(by=user, team=team, network="host")
    assert policy_for_team(team.pk).network == "host"
    record = AuditRecord.objects.get(kind="policy.updated")
    assert record.data["after"]["network"] == "host"


def test_the_policy_api_shows_and_edits_the_network(user, team, settings):
    url = f"/api/teams/{team.pk}/policy"
    api = client_for(user)
    body = send(api, "get", url).json()
    assert body["effective"]["network"] == "none"

    settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK = False
    refused = send(api, "put", url, {"network": "host"})
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_input"
    assert "CANVAS_SANDBOX_ALLOW_HOST_NETWORK" in refused.json()["detail"]
    assert send(api, "put", url, {"network": "internet"}).status_code == 400

    settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK = True
    body = send(api, "put", url, {"network": "host"}).json()
    assert body["team"]["network"] == body["effective"]["network"] == "host"
    Policy.objects.create(team=None, network="none")  # the site default is stricter
    assert send(api, "get", url).json()["effective"]["network"] == "none"
