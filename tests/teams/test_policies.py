"""Team policies and model profiles: combining rows, tightening, changing them, the API."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.test import Client

from common.errors import Forbidden, InvalidInput
from conversations.models import Conversation
from orchestration.step.profiles import ApiKeyError, profile_get, profile_with_api_key
from teams.models import AuditRecord, ModelProfile, Policy, Secret, Team
from teams.policies import EffectivePolicy, effective_from_rows, policy_for_team, policy_update
from teams.policies import tighten as tighten_policy
from teams.secrets import secret_create
from teams.services import member_add
from teams.tokens import api_token_create

pytestmark = pytest.mark.django_db


def team_of(user) -> Team:
    return Team.objects.get(memberships__user=user)


def as_client(user) -> Client:
    return Client(headers={"Authorization": f"Bearer {api_token_create(user=user, name='t')[1]}"})


def send(client: Client, method: str, url: str, body=None) -> tuple[int, dict | list | None]:
    if method in {"get", "delete"}:
        response = getattr(client, method)(url)
    else:
        response = getattr(client, method)(
            url, data=json.dumps(body or {}), content_type="application/json"
        )
    return response.status_code, (response.json() if response.content else None)


@pytest.fixture
def viewer(django_user_model, user):
    bob = django_user_model.objects.create_user("bob", password="bob-password-1")
    member_add(by=user, team=team_of(user), username="bob", role="viewer")
    return bob


# --- combining the site default and the team's row -------------------------------------------


def test_out_of_the_box_confirms_risky_at_high_and_limits_nothing(user, settings):
    effective = policy_for_team(team_of(user).pk)
    assert effective == EffectivePolicy()
    assert (effective.confirmation_mode, effective.risk_threshold) == ("risky", "HIGH")
    assert effective.tool_allowed("terminal") and effective.agent_kind_allowed("acp:claude")
    resolved = tighten_policy(effective, {})
    assert resolved["max_iterations"] == settings.CANVAS_MAX_ITERATIONS
    assert resolved["max_cost_usd"] is None and resolved["tools"] is None


def test_the_stricter_value_of_every_field_wins():
    site = Policy(
        confirmation_mode="always", risk_threshold="HIGH", allowed_tools=["think", "terminal"],
        max_iterations_per_run=50, max_cost_per_run_usd=Decimal("2"), max_concurrent_runs=None,
    )  # fmt: skip
    team = Policy(
        confirmation_mode="never", risk_threshold="LOW", allowed_tools=["terminal", "finish"],
        allowed_agent_kinds=["native"], max_iterations_per_run=80,
        max_cost_per_run_usd=Decimal("1.5"), max_cost_per_month_usd=Decimal("100"),
        max_concurrent_runs=3,
    )  # fmt: skip
    effective = effective_from_rows([site, team])
    assert effective.confirmation_mode == "always"
    assert effective.risk_threshold == "LOW"
    assert effective.allowed_tools == ("terminal",)
    assert effective.allowed_agent_kinds == ("native",)
    assert effective.max_iterations_per_run == 50
    assert effective.max_cost_per_run_usd == Decimal("1.5")
    assert effective.max_cost_per_month_usd == Decimal("100")
    assert effective.max_concurrent_runs == 3
    assert effective_from_rows([team, site]) == effective  # order does not matter


def test_allow_lists_that_do_not_overlap_allow_nothing_not_everything():
    effective = effective_from_rows(
        [Policy(allowed_tools=["terminal"]), Policy(allowed_tools=["think"])]
    )
    assert effective.allowed_tools == ()
    assert not effective.tool_allowed("terminal") and not effective.tool_allowed("think")


def test_policy_for_team_reads_the_site_default_and_only_its_own_row(user, other_user):
    Policy.objects.create(team=None, max_concurrent_runs=5, confirmation_mode="always")
    Policy.objects.create(team=team_of(other_user), max_concurrent_runs=1)
    Policy.objects.create(team=team_of(user), max_concurrent_runs=9, risk_threshold="MEDIUM")
    effective = policy_for_team(team_of(user).pk)
    assert effective.max_concurrent_runs == 5
    assert (effective.confirmation_mode, effective.risk_threshold) == ("always", "MEDIUM")


# --- a conversation may tighten, never loosen ------------------------------------------------

STRICT = EffectivePolicy(
    confirmation_mode="risky", risk_threshold="MEDIUM", allowed_tools=("think", "finish"),
    max_iterations_per_run=10, max_cost_per_run_usd=Decimal("1"),
)  # fmt: skip


@pytest.mark.parametrize(
    "requested, reason",
    [
        ({"confirmation_mode": "never"}, "confirmation_mode 'never' is looser"),
        ({"risk_threshold": "HIGH"}, "risk_threshold 'HIGH' is looser"),
        ({"max_iterations": 11}, "above the team policy's limit of 10 iterations"),
        ({"max_cost_usd": 1.01}, "above the team policy's limit of $1"),
        ({"tools": ["think", "terminal"]}, "tools not allowed by the team policy: terminal"),
    ],
)
def test_a_looser_request_is_refused_with_the_reason(requested, reason):
    with pytest.raises(InvalidInput) as refused:
        tighten_policy(STRICT, requested)
    assert reason in refused.value.detail
    assert "never loosen it" in refused.value.detail


def test_a_tighter_request_is_kept_and_gaps_take_the_policy():
    resolved = tighten_policy(
        STRICT,
        {"confirmation_mode": "always", "risk_threshold": "LOW", "max_iterations": 3,
         "max_cost_usd": 0.25, "tools": ["finish"]},
    )  # fmt: skip
    assert resolved == {
        "confirmation_mode": "always", "risk_threshold": "LOW", "max_iterations": 3,
        "max_cost_usd": 0.25, "tools": ("finish",),
    }  # fmt: skip
    defaults = tighten_policy(STRICT, {})
    assert defaults["max_iterations"] == 10 and defaults["max_cost_usd"] == 1.0
    assert defaults["confirmation_mode"] == "risky" and defaults["risk_threshold"] == "MEDIUM"


# --- changing a policy -----------------------------------------------------------------------


def test_policy_update_validates_and_is_audited_with_before_and_after(user):
    team = team_of(user)
    policy_update(by=user, team=team, max_iterations_per_run=20)
    row = policy_update(by=user, team=team, max_cost_per_month_usd="12.5", allowed_tools=["think"])
    assert row.max_iterations_per_run == 20 and row.max_cost_per_month_usd == Decimal("12.5")
    first, second = AuditRecord.objects.filter(kind="policy.updated").order_by("id")
    assert first.data["before"] is None
    assert second.data["before"]["max_cost_per_month_usd"] is None
    assert second.data["after"]["max_cost_per_month_usd"] == "12.5000"
    assert second.data["after"]["allowed_tools"] == ["think"]
    for bad in (
        {"confirmation_mode": "sometimes"},
        {"max_concurrent_runs": 0},
        {"max_cost_per_run_usd": -1},
        {"allowed_agent_kinds": ["docker"]},
        {"no_such_field": 1},
    ):
        with pytest.raises(InvalidInput):
            policy_update(by=user, team=team, **bad)


def test_only_admins_change_a_team_policy_and_only_site_admins_the_default(user, viewer):
    with pytest.raises(Forbidden):
        policy_update(by=viewer, team=team_of(user), max_concurrent_runs=1)
    with pytest.raises(Forbidden):
        policy_update(by=user, team=None, max_concurrent_runs=1)
    assert not Policy.objects.exists()


# --- the API ---------------------------------------------------------------------------------


def test_policy_api_shows_the_team_row_and_the_effective_policy(user, viewer):
    team = team_of(user)
    Policy.objects.create(team=None, max_cost_per_run_usd=Decimal("3"))
    url = f"/api/teams/{team.pk}/policy"
    status, body = send(as_client(viewer), "get", url)
    assert status == 200 and body["team"] is None
    assert body["effective"]["max_cost_per_run_usd"] == 3.0
    assert body["effective"]["allowed_tools"] is None

    status, body = send(
        as_client(user), "put", url,
        {"confirmation_mode": "always", "max_cost_per_run_usd": 5, "allowed_tools": ["think"],
         "max_concurrent_runs": 2},
    )  # fmt: skip
    assert status == 200
    assert body["team"]["confirmation_mode"] == "always"
    assert body["team"]["max_cost_per_run_usd"] == 5.0
    assert body["effective"]["max_cost_per_run_usd"] == 3.0  # the site default is stricter
    assert body["effective"]["allowed_tools"] == ["think"]
    assert body["effective"]["max_concurrent_runs"] == 2


def test_a_viewer_cannot_change_the_policy_and_another_team_is_404(user, viewer, other_user):
    team = team_of(user)
    status, body = send(as_client(viewer), "put", f"/api/teams/{team.pk}/policy", {})
    assert status == 403 and body["error"] == "forbidden"
    mallory = as_client(other_user)
    assert send(mallory, "get", f"/api/teams/{team.pk}/policy")[0] == 404
    assert send(mallory, "put", f"/api/teams/{team.pk}/policy", {})[0] == 404
    assert not Policy.objects.exists()


def test_policy_api_rejects_bad_values_with_400(user):
    url = f"/api/teams/{team_of(user).pk}/policy"
    for body in ({"confirmation_mode": "sometimes"}, {"max_concurrent_runs": 0},
                 {"allowed_agent_kinds": ["acp:"]}):  # fmt: skip
        status, answer = send(as_client(user), "put", url, body)
        assert status == 400 and answer["error"] == "invalid_input"


def test_conversations_may_tighten_but_not_loosen_the_team_policy(user, dispatched):
    team = team_of(user)
    policy_update(
        by=user, team=team, risk_threshold="MEDIUM", max_iterations_per_run=10,
        max_cost_per_run_usd="1", allowed_tools=["think", "finish", "terminal"],
    )  # fmt: skip
    api = as_client(user)
    base = {"prompt": "hi", "model": "scripted", "team": team.pk}
    for loosening, reason in [
        ({"confirmation_mode": "never"}, "confirmation_mode"),
        ({"risk_threshold": "HIGH"}, "risk_threshold"),
        ({"max_iterations": 50}, "max_iterations"),
        ({"max_cost_usd": 2}, "max_cost_usd"),
        ({"tools": ["file_editor"]}, "file_editor"),
    ]:
        status, body = send(api, "post", "/api/conversations", base | loosening)
        assert status == 400, loosening
        assert reason in body["detail"] and "never loosen" in body["detail"]
    assert not Conversation.objects.exists() and not dispatched

    status, body = send(
        api, "post", "/api/conversations",
        base | {"confirmation_mode": "always", "risk_threshold": "LOW", "max_iterations": 4,
                "max_cost_usd": 0.5, "tools": ["think", "finish"]},
    )  # fmt: skip
    assert status == 201
    config = Conversation.objects.get(pk=body["id"]).agent_config
    assert config["confirmation_mode"] == "always" and config["risk_threshold"] == "LOW"
    assert config["max_iterations"] == 4 and config["max_cost_usd"] == 0.5
    assert config["tools"] == ["think", "finish"]

    # Unrequested values take the policy's, and the default tools are narrowed to it.
    status, body = send(api, "post", "/api/conversations", base)
    config = Conversation.objects.get(pk=body["id"]).agent_config
    assert config["max_iterations"] == 10 and config["max_cost_usd"] == 1.0
    assert config["risk_threshold"] == "MEDIUM"
    assert config["tools"] == ["terminal", "think", "finish"]


def test_a_policy_without_native_agents_refuses_native_conversations(user, dispatched):
    team = team_of(user)
    policy_update(by=user, team=team, allowed_agent_kinds=["acp:claude"])
    status, body = send(
        as_client(user), "post", "/api/conversations",
        {"prompt": "hi", "model": "scripted", "team": team.pk},
    )  # fmt: skip
    assert status == 400 and "native agents" in body["detail"]


# --- model profiles --------------------------------------------------------------------------


def test_profile_api_manages_profiles_and_never_returns_keys(user, viewer, other_user):
    team = team_of(user)
    secret_create(by=user, team=team, name="OPENAI_KEY", value="sk-never-shown")
    api, url = as_client(user), f"/api/teams/{team.pk}/profiles"
    profile = {
        "name": "openai/fast", "model": "openai/gpt-4o-mini", "api_base": "https://llm.example/v1",
        "api_key_secret": "OPENAI_KEY", "temperature": 0.2,
    }  # fmt: skip
    status, created = send(api, "post", url, profile)
    assert status == 201
    assert created == profile | {"max_input_tokens": None}
    assert send(api, "post", url, profile)[0] == 409

    status, listed = send(as_client(viewer), "get", url)
    assert status == 200 and [p["name"] for p in listed] == ["openai/fast"]
    assert set(listed[0]) == {
        "name", "model", "api_base", "api_key_secret", "max_input_tokens", "temperature"
    }  # fmt: skip
    assert "sk-never-shown" not in json.dumps([created, listed])

    status, updated = send(
        api, "put", f"{url}/openai/fast", {"model": "openai/gpt-4o", "max_input_tokens": 1000}
    )
    assert status == 200 and updated["model"] == "openai/gpt-4o"
    assert updated["api_key_secret"] == "" and updated["max_input_tokens"] == 1000

    assert send(as_client(viewer), "post", url, profile | {"name": "x"})[0] == 403
    assert send(as_client(viewer), "delete", f"{url}/openai/fast")[0] == 403
    assert send(as_client(other_user), "get", url)[0] == 404
    assert send(api, "delete", f"{url}/openai/fast")[0] == 204
    assert send(api, "delete", f"{url}/openai/fast")[0] == 404
    kinds = list(
        AuditRecord.objects.filter(kind__startswith="profile.").values_list("kind", flat=True)
    )
    assert sorted(kinds) == ["profile.created", "profile.deleted", "profile.updated"]


def test_a_profile_must_name_an_existing_secret_of_its_own_team(user, other_user):
    Secret.objects.create(team=team_of(other_user), name="THEIR_KEY", ciphertext="x")
    status, body = send(
        as_client(user), "post", f"/api/teams/{team_of(user).pk}/profiles",
        {"name": "p", "model": "openai/gpt-4o", "api_key_secret": "THEIR_KEY"},
    )  # fmt: skip
    assert status == 400 and "no secret named 'THEIR_KEY'" in body["detail"]


def test_a_team_profile_wins_over_built_ins_and_takes_its_key_from_the_team_secret(
    user, other_user, monkeypatch
):
    team = team_of(user)
    ModelProfile.objects.create(
        team=team, name="scripted", model="openai/gpt-4o-mini", api_key_secret="OPENAI_KEY"
    )
    assert profile_get("scripted").model == "canvas/scripted"  # no team: the built-in
    assert profile_get("scripted", team_of(other_user).pk).model == "canvas/scripted"
    own = profile_get("scripted", team.pk)
    assert own.model == "openai/gpt-4o-mini" and own.api_key is None  # not read on the web

    reads = patch_team_secrets(monkeypatch, {team.pk: {"OPENAI_KEY": "sk-team-secret"}})
    keyed = profile_with_api_key(own)
    assert keyed.api_key == "sk-team-secret" and reads == [team.pk]
    assert "sk-team-secret" not in repr(keyed)

    patch_team_secrets(monkeypatch, {})  # the secret was deleted since
    with pytest.raises(ApiKeyError, match="team secret 'OPENAI_KEY'"):
        profile_with_api_key(own)


def patch_team_secrets(monkeypatch, values: dict[int, dict[str, str]]) -> list[int]:
    """Serve team secrets from `values` instead of the encrypted store; returns the team ids
    read, to show when the key is (and is not) read."""
    import teams.secrets as module

    reads: list[int] = []

    def secret_values_for_team(team_id: int) -> dict[str, str]:
        reads.append(team_id)
        return dict(values.get(team_id, {}))

    monkeypatch.setattr(module, "secret_values_for_team", secret_values_for_team)
    return reads
