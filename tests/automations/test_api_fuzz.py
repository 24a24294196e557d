"""Schemathesis over the automations' routes with a real automation's id in every path, so
fuzzed bodies reach automations.services (the project-wide fuzz test, tests/canvas/
test_api_fuzz.py, knows no automation id: its requests stop at a 404). Never a 5xx."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from automations import services
from canvas.wsgi import application
from teams.tokens import api_token_create

pytestmark = pytest.mark.django_db

MAX_EXAMPLES = 30


@pytest.fixture(autouse=True)
def _keep_the_test_connection() -> Iterator[None]:
    """As in tests/canvas/test_api_fuzz.py: keep the test's transaction across requests."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def _load_schema() -> schemathesis.BaseSchema:
    loaded = schemathesis.openapi.from_wsgi("/api/openapi.json", application)
    loaded = loaded.include(tag="automations")
    loaded.config.generation.update(
        modes=["positive", "negative"], max_examples=MAX_EXAMPLES, deterministic=True,
        allow_x00=True, database="none",
    )  # fmt: skip
    loaded.config.phases.update(phases=["examples", "coverage", "fuzzing"])
    return loaded


schema = _load_schema()


@pytest.fixture
def known(user, team, dispatched) -> dict[str, str]:
    made = services.automation_create(
        by=user, team=team, name="fuzzed", trigger="webhook", model="scripted",
        prompt_template="PR {{ payload.number }}",
    )  # fmt: skip
    return {
        "authorization": f"Bearer {api_token_create(user=user, name='fuzz')[1]}",
        "team_id": str(team.pk),
        "automation_id": str(made.automation.pk),
    }


@schema.parametrize()
@settings(deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
def test_no_input_makes_a_server_error(case, known) -> None:
    for key in ("team_id", "automation_id"):
        if case.path_parameters and key in case.path_parameters:
            case.path_parameters[key] = known[key]
    response = case.call(headers={"Authorization": known["authorization"]})
    case.validate_response(response, checks=[not_a_server_error])
