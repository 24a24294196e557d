"""Team policy limits enforced by the runner: iterations, budgets, tools, concurrent runs.

Runs are driven in-process slice by slice (as in test_runner.py), except the concurrent-run
test, which uses real Celery worker processes. Costs are real LiteLLM costs: a team model
profile points "openai/gpt-4o-mini" (a model LiteLLM has a price for) at the fake
OpenAI-compatible server in tests/fakes.py, so every call costs a fraction of a cent.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from django.db import connection

from conversations import store
from conversations.events import AgentErrorEvent, ObservationEvent
from conversations.models import Conversation
from orchestration import run_control, services
from orchestration.chain.admission import QUEUE_RETRY_SECONDS
from orchestration.chain.lease import lease_claim
from orchestration.chain.slices import run_slice
from orchestration.step.agent import AgentConfig
from orchestration.step.limits import run_limits
from teams.budget import spend_add, spend_this_month
from teams.models import Policy, Team
from teams.policies import EffectivePolicy, policy_update
from teams.profiles import profile_create
from teams.secrets import secret_create
from tests.conftest import wait_for
from tests.fakes import FakeOpenAI, think_until
from tests.runs import drive, script

pytestmark = pytest.mark.django_db(transaction=True)

TEAM_KEY = "sk-team-secret-value"


def thinks(n: int) -> str:
    return script(*[{"tool": "think", "args": {"thought": str(i)}} for i in range(n)])


def events(conversation) -> list:
    return [s.event for s in store.load(conversation.pk)]


def errors(conversation) -> list[AgentErrorEvent]:
    return [e for e in events(conversation) if isinstance(e, AgentErrorEvent)]


def status_of(conversation) -> str:
    return Conversation.objects.get(pk=conversation.pk).status


def start(user, team: Team, prompt: str, model: str = "scripted", **limits) -> Conversation:
    return services.conversation_create(owner=user, team=team, model=model, prompt=prompt, **limits)


# --- iterations ------------------------------------------------------------------------------


def test_run_limits_take_the_tighter_of_the_conversation_and_the_current_policy():
    config = AgentConfig(
        model="scripted", max_iterations=30, max_cost_usd=2.0, confirmation_mode="never",
        risk_threshold="MEDIUM",
    )  # fmt: skip
    policy = EffectivePolicy(
        confirmation_mode="risky", risk_threshold="HIGH", max_iterations_per_run=40,
        max_cost_per_run_usd=Decimal("1.5"),
    )  # fmt: skip
    limits = run_limits(config, policy)
    assert (limits.max_iterations, limits.iterations_source) == (30, "this conversation's limit")
    assert (limits.max_cost_usd, limits.cost_source) == (1.5, "the team policy's limit")
    assert (limits.confirmation_mode, limits.risk_threshold) == ("risky", "MEDIUM")


def test_the_team_iteration_limit_ends_the_run_with_a_clear_event(user, team, dispatched):
    policy_update(by=user, team=team, max_iterations_per_run=2)
    conversation = start(user, team, thinks(5))
    drive(dispatched)
    assert status_of(conversation) == "error"
    (error,) = errors(conversation)
    assert error.code == "max_iterations"
    assert "limit of 2 iterations (the team policy's limit)" in error.message
    assert "team admin can raise" in error.message and "continue" in error.message
    assert events(conversation)[-1].reason == "max iterations reached"


def test_a_policy_tightened_mid_run_applies_from_the_next_slice(user, team, dispatched, settings):
    settings.CANVAS_SLICE_STEPS = 1
    conversation = start(user, team, thinks(5))
    assert run_slice(*dispatched.pop(0)) is None  # one slice, one step
    assert status_of(conversation) == "running"
    policy_update(by=user, team=team, max_iterations_per_run=1)
    drive(dispatched)
    assert [e.code for e in errors(conversation)] == ["max_iterations"]
    assert Conversation.objects.get(pk=conversation.pk).steps == 1


# --- tools -----------------------------------------------------------------------------------


def test_a_disallowed_tool_call_is_an_error_observation_and_the_run_goes_on(user, team, dispatched):
    conversation = start(
        user, team,
        script(
            {"tool": "terminal", "args": {"command": "touch ran.txt"}},
            {"tool": "think", "args": {"thought": "no terminal then"}},
            {"tool": "finish", "args": {"message": "done without it"}},
        ),
    )  # fmt: skip
    # Allowed when the conversation started; the policy changes before its first slice.
    policy_update(by=user, team=team, allowed_tools=["think", "finish"])
    drive(dispatched)
    assert status_of(conversation) == "finished"
    results = [e for e in events(conversation) if isinstance(e, ObservationEvent)]
    assert [(r.tool, r.is_error) for r in results] == [
        ("terminal", True), ("think", False), ("finish", False),
    ]  # fmt: skip
    assert "Tool 'terminal' is not allowed by this team's policy" in results[0].content
    assert not (Path(conversation.workspace_path) / "ran.txt").exists()


# --- budgets (real LiteLLM costs through the fake provider) ----------------------------------


@pytest.fixture
def priced(user, team, loopback_allowed) -> Iterator[FakeOpenAI]:
    """A team profile "priced": gpt-4o-mini prices, served by the fake, its key in a real
    (encrypted) team secret."""
    secret_create(by=user, team=team, name="OPENAI_KEY", value=TEAM_KEY)
    with FakeOpenAI(responder=think_until(1000)) as fake:
        profile_create(
            by=user, team=team, name="priced", model="openai/gpt-4o-mini",
            api_base=fake.base_url, api_key_secret="OPENAI_KEY",
        )  # fmt: skip
        yield fake


def step_costs(conversation) -> list[float]:
    return [e.usage.cost_usd for e in events(conversation) if getattr(e, "usage", None)]


def test_the_per_run_budget_ends_the_run(user, team, dispatched, priced):
    policy_update(by=user, team=team, max_cost_per_run_usd="0.0004")
    # The four basic tools: each step's price is its prompt's, schemas included.
    conversation = start(
        user, team, "think a lot", model="priced",
        tools=["terminal", "file_editor", "think", "finish"],
    )  # fmt: skip
    drive(dispatched)
    assert status_of(conversation) == "error"
    (error,) = errors(conversation)
    assert error.code == "budget_run"
    assert "budget of $0.0004 per run (the team policy's limit)" in error.message
    assert "team admin can raise" in error.message
    costs = step_costs(conversation)
    assert all(c > 0 for c in costs) and len(costs) >= 2
    assert sum(costs) >= 0.0004 > sum(costs[:-1])  # stopped before the first call over it
    assert priced.count == len(costs)
    # Every call's cost is on the team's monthly bill, as on the conversation.
    row = Conversation.objects.get(pk=conversation.pk)
    assert abs(spend_this_month(team.pk) - row.cost_usd) < Decimal("0.00001")
    # The key came from the team secret and went nowhere but the provider.
    assert {h["authorization"] for h in priced.request_headers} == {f"Bearer {TEAM_KEY}"}
    stored = json.dumps([s.as_record() for s in store.load(conversation.pk)], default=str)
    assert TEAM_KEY not in stored and TEAM_KEY not in json.dumps(row.agent_config)


def test_a_conversation_can_set_a_tighter_run_budget_of_its_own(user, team, dispatched, priced):
    conversation = start(user, team, "think", model="priced", max_cost_usd=0.0002)
    drive(dispatched)
    (error,) = errors(conversation)
    assert error.code == "budget_run" and "(this conversation's limit)" in error.message
    assert "Send a message or press Run" in error.message


def test_the_monthly_team_budget_ends_runs_until_an_admin_raises_it(user, team, dispatched, priced):
    spend_add(team.pk, Decimal("0.0003"))  # spent earlier this month
    policy_update(by=user, team=team, max_cost_per_month_usd="0.0006")
    first = start(user, team, "think", model="priced")
    drive(dispatched)
    (error,) = errors(first)
    assert error.code == "budget_month"
    assert f"Team {team.name!r} has spent $" in error.message
    assert "monthly budget of $0.0006" in error.message and "admin can raise" in error.message
    assert spend_this_month(team.pk) >= Decimal("0.0006")

    # Another conversation of the team stops before asking the model anything.
    calls = priced.count
    second = start(user, team, "think", model="priced")
    drive(dispatched)
    assert [e.code for e in errors(second)] == ["budget_month"] and priced.count == calls

    policy_update(by=user, team=team, max_cost_per_month_usd="1")
    run_control.conversation_run(conversation_id=second.pk, by=user)
    policy_update(by=user, team=team, max_iterations_per_run=2)  # keep the continued run short
    drive(dispatched)
    assert priced.count == calls + 2
    assert [e.code for e in errors(second)] == ["budget_month", "max_iterations"]


# --- concurrent runs -------------------------------------------------------------------------


def queued(conversation) -> list[AgentErrorEvent]:
    return [e for e in errors(conversation) if e.code == "queued"]


def test_a_run_over_the_concurrency_limit_waits_with_one_notice(user, team, dispatched, settings):
    settings.CANVAS_SLICE_STEPS = 1
    policy_update(by=user, team=team, max_concurrent_runs=1)
    first = start(user, team, thinks(3))
    second = start(user, team, thinks(1))
    (first_slice, second_slice) = dispatched[:]
    dispatched.clear()
    assert run_slice(*first_slice) is None  # admitted: one step, the next slice is queued
    assert status_of(first) == "running" and len(dispatched) == 1

    for _ in range(3):  # the task retries: still waiting, and the notice is written once
        assert run_slice(*second_slice) == QUEUE_RETRY_SECONDS
    (notice,) = queued(second)
    assert notice.message.startswith(f"waiting: team {team.name!r} is at its limit of 1")
    assert Conversation.objects.get(pk=second.pk).steps == 0

    drive(dispatched)  # the first run goes on between slices without losing its place
    assert status_of(first) == "finished"
    dispatched.append(second_slice)
    drive(dispatched)
    assert status_of(second) != "running" and len(queued(second)) == 1
    assert Conversation.objects.get(pk=second.pk).steps >= 1


def race_claims(slices: list[tuple[str, str]]) -> list[object]:
    """Call lease_claim for every slice at the same moment, each on its own connection."""
    barrier = threading.Barrier(len(slices))
    results: list[object] = []

    def claim(conversation_id: str, slice_id: str) -> None:
        try:
            barrier.wait()
            results.append(lease_claim(conversation_id, slice_id))
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=s) for s in slices]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_two_slices_racing_for_the_last_place_cannot_both_get_it(user, team, dispatched):
    policy_update(by=user, team=team, max_concurrent_runs=1)
    for _ in range(5):
        dispatched.clear()
        pair = [start(user, team, thinks(1)) for _ in range(2)]
        results = race_claims(dispatched[:])
        assert sorted((r.claimed, r.retry_after is not None) for r in results) == [
            (False, True), (True, False),
        ]  # fmt: skip
        for conversation in pair:  # free the place for the next round
            run_control.conversation_pause(conversation_id=conversation.pk, by=user)
        Conversation.objects.filter(team=team).update(lease_token=None, lease_expires_at=None)


@pytest.mark.worker
def test_with_real_workers_the_second_run_waits_for_the_first(start_worker, settings):
    local, _ = Team.objects.get_or_create(name=services.LOCAL_TEAM)
    Policy.objects.create(team=None, max_concurrent_runs=1)  # the site default binds Local
    start_worker()
    first = services.conversation_create(
        owner=None, team=local, model="scripted",
        prompt=script(
            *[{"tool": "terminal", "args": {"command": f"sleep 0.4; echo {i}"}} for i in range(4)],
            {"tool": "finish", "args": {"message": "first done"}},
        ),
    )  # fmt: skip
    wait_for(
        lambda: any(e.type == "tool.call" for e in events(first)), 60, message="first to start"
    )
    second = services.conversation_create(
        owner=None, team=local, model="scripted",
        prompt=script({"tool": "finish", "args": {"message": "second done"}}),
    )  # fmt: skip
    wait_for(lambda: queued(second), 30, message="the second run to be queued")
    assert status_of(first) == "running"
    wait_for(lambda: status_of(second) == "finished", 90, message="second to finish")
    assert status_of(first) == "finished"

    first_end = next(s for s in store.load(first.pk) if s.event.type == "run.finished")
    second_log = store.load(second.pk)
    steps = [s for s in second_log if s.event.type == "tool.call"]
    assert steps and steps[0].created_at > first_end.created_at
    assert len(queued(second)) == 1
    notice = next(s for s in second_log if s.event.type == "agent.error")
    assert notice.seq < steps[0].seq
