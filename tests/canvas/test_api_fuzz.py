"""Schemathesis over the whole OpenAPI schema: whatever a client sends, never a 5xx.

Every operation is one test. Requests go in-process to the Django WSGI app (so the data stays
in this test's database and is rolled back), authenticated with a real API token of a user
who owns a team with a conversation; ids in paths name those, so bodies reach the services
instead of stopping at a 404. Schema-conforming and schema-violating inputs both, NUL
characters included, with a fixed seed and a bounded number of examples per operation.

Runs are captured (the `dispatched` fixture): a created conversation never starts a real
agent. Hook commands the fuzzer writes are never executed (see `_no_hook_commands`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from canvas.wsgi import application
from orchestration import services
from teams import hooks
from teams.tokens import api_token_create

pytestmark = pytest.mark.django_db

MAX_EXAMPLES = 20
"""Per operation, for the random phase; with the deterministic boundary cases this is about
2,300 requests in about a minute on 2 cores."""


@pytest.fixture(autouse=True)
def _keep_the_test_connection() -> Iterator[None]:
    """The WSGI handler closes the database connection after each request, which would end
    the test's transaction; Django's own test client unhooks the same signal."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def _load_schema() -> schemathesis.BaseSchema:
    # Loaded at collection, one test per operation. (Loading it from a fixture, the lazy way,
    # fails on pytest 9.2: schemathesis 4.32 renames items through a removed attribute.)
    loaded = schemathesis.openapi.from_wsgi("/api/openapi.json", application)
    loaded.config.generation.update(
        modes=["positive", "negative"],
        max_examples=MAX_EXAMPLES,
        deterministic=True,
        allow_x00=True,
        database="none",
    )
    loaded.config.phases.update(phases=["examples", "coverage", "fuzzing"])
    return loaded


schema = _load_schema()


@pytest.fixture
def _no_hook_commands(monkeypatch) -> None:
    """The fuzzer writes random hook commands; none may reach a shell (a 500 if one tries)."""
    import orchestration.control.hooks

    def refuse(*args, **kwargs):
        raise AssertionError("the API fuzz must not run hook commands")

    monkeypatch.setattr(orchestration.control.hooks, "run_hook", refuse)


@pytest.fixture
def known(user, team, dispatched, _no_hook_commands) -> dict[str, str]:
    """A token and path ids naming alice's own team, conversation and hook."""
    conversation = services.conversation_create(owner=user, model="scripted", prompt="hello")
    hook = hooks.hook_create(by=user, team=team, name="h", event="Stop", command="true")
    token = api_token_create(user=user, name="fuzz")[1]
    return {
        "authorization": f"Bearer {token}",
        "team_id": str(team.pk),
        "conversation_id": str(conversation.pk),
        "hook_id": str(hook.pk),
    }


@schema.parametrize()
@settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_input_makes_a_server_error(case, known) -> None:
    for key in ("team_id", "conversation_id", "hook_id"):
        if case.path_parameters and key in case.path_parameters:
            case.path_parameters[key] = known[key]
    response = case.call(headers={"Authorization": known["authorization"]})
    case.validate_response(response, checks=[not_a_server_error])
