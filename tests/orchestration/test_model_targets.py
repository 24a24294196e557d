"""A team profile's api_base is checked again right before every model call
(orchestration/step/llm.py): one that was allowed when saved but is refused now (the site's
allowance withdrawn, or its name resolving to an internal address) ends the run with a clear
model error and never reaches the server. Site-configured profiles are the operator's choice
and not checked (tests/orchestration/test_llm_http.py calls 127.0.0.1 through them)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conversations import store
from conversations.events import AgentErrorEvent
from conversations.models import Conversation
from orchestration import services
from teams.profiles import profile_create
from teams.secrets import secret_create
from tests.fakes import FakeOpenAI, think_until
from tests.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def local_model(user, team, loopback_allowed) -> Iterator[FakeOpenAI]:
    """A team profile "local" at http://localhost:PORT/v1, saved while the site allows
    loopback (the real resolver answers for localhost)."""
    secret_create(by=user, team=team, name="LOCAL_KEY", value="sk-local-model-key")
    with FakeOpenAI(responder=think_until(1)) as fake:
        profile_create(
            by=user, team=team, name="local", model="openai/gpt-4o-mini",
            api_base=f"http://localhost:{fake.port}/v1", api_key_secret="LOCAL_KEY",
        )  # fmt: skip
        yield fake


def run(user, team, dispatched) -> tuple[str, list]:
    conversation = services.conversation_create(
        owner=user, team=team, model="local", prompt="think once"
    )
    drive(dispatched)
    status = Conversation.objects.get(pk=conversation.pk).status
    return status, [s.event for s in store.load(conversation.pk)]


def test_an_allowed_api_base_is_called(user, team, dispatched, local_model) -> None:
    status, events = run(user, team, dispatched)
    assert status == "finished", [e for e in events if isinstance(e, AgentErrorEvent)]
    assert local_model.count == 2


def test_an_api_base_refused_since_it_was_saved_ends_the_run_without_a_call(
    user, team, dispatched, local_model, settings
) -> None:
    settings.CANVAS_ALLOWED_PRIVATE_NETWORKS = []
    status, events = run(user, team, dispatched)
    assert status == "error"
    (error,) = [e for e in events if isinstance(e, AgentErrorEvent)]
    assert error.code == "llm_api_base_refused"
    assert "Model profile 'local': api_base is refused: localhost is a loopback name" in (
        error.message
    )
    assert local_model.count == 0


def test_a_local_default_provider_is_checked_before_the_call(team, settings) -> None:
    """ollama/... without an api_base would call localhost:11434: refused before any call
    once the site no longer allows loopback."""
    from orchestration.step.llm import LiteLLMClient, LLMError
    from orchestration.step.profiles import ModelProfile

    settings.CANVAS_ALLOWED_PRIVATE_NETWORKS = []
    client = LiteLLMClient(
        ModelProfile(name="local", model="ollama/llama3", team_id=team.pk, num_retries=0)
    )
    with pytest.raises(LLMError) as caught:
        client.complete([{"role": "user", "content": "hi"}], [])
    assert caught.value.code == "llm_api_base_refused"
    assert "localhost is a loopback name" in caught.value.message
