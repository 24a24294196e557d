"""LiteLLM against a real HTTP provider (tests/fakes.py): responses, retries, errors, timeouts.

Retries are kept fast by the fake's `retry-after-ms` header, which the OpenAI SDK honours
instead of its exponential backoff; only timeouts (no response, so no header) pay the SDK's
0.5 s / 1 s backoff.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from orchestration.step.llm import LiteLLMClient, LLMError
from orchestration.step.profiles import ModelProfile
from tests.fakes import FakeOpenAI

KEY_ENV = "FAKE_OPENAI_KEY"
MESSAGES = [{"role": "user", "content": "hi"}]
THINK_SCHEMA = {
    "type": "function",
    "function": {
        "name": "think",
        "description": "Think.",
        "parameters": {
            "type": "object",
            "properties": {"thought": {"type": "string"}},
            "required": ["thought"],
        },
    },
}


@pytest.fixture
def fake(monkeypatch) -> Iterator[FakeOpenAI]:
    monkeypatch.setenv(KEY_ENV, "dummy-key")
    with FakeOpenAI(retry_after_ms=5) as server:
        yield server


def client_for(fake: FakeOpenAI, *, num_retries: int = 2, timeout: float = 5.0) -> LiteLLMClient:
    return LiteLLMClient(
        ModelProfile(
            name="fake",
            model="openai/fake-model",
            api_base=fake.base_url,
            api_key_env=KEY_ENV,
            timeout=timeout,
            num_retries=num_retries,
        )
    )


def test_tool_call_response_becomes_llm_response(fake):
    fake.push(tool="think", args={"thought": "plan"}, say="Let me think.")

    response = client_for(fake).complete(MESSAGES, [THINK_SCHEMA])

    assert [(c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        ("think", {"thought": "plan"})
    ]
    assert response.tool_calls[0].id == "call_1_0"
    assert response.content == "Let me think."
    assert response.id == "chatcmpl-fake-1"
    assert response.usage.prompt_tokens > 0
    assert response.usage.completion_tokens > 0
    # What went over the wire: the provider's model id, our tools, the key from the env.
    (body,) = fake.requests
    assert body["model"] == "fake-model"
    assert body["messages"] == MESSAGES
    assert body["tools"][0]["function"]["name"] == "think"
    assert fake.request_headers[0]["authorization"] == "Bearer dummy-key"


def test_rate_limit_then_server_error_are_retried(fake):
    fake.push(status=429, error="slow down").push(status=500, error="oops")
    fake.push(say="finally")

    response = client_for(fake, num_retries=2).complete(MESSAGES, [])

    assert response.content == "finally"
    assert response.tool_calls == []
    assert fake.count == 3


def test_persistent_server_error_raises_with_provider_text_and_status(fake):
    fake.responder = lambda request: {"status": 500, "error": "the GPUs are on fire"}

    with pytest.raises(LLMError) as caught:
        client_for(fake, num_retries=2).complete(MESSAGES, [])

    assert "the GPUs are on fire" in caught.value.message
    assert "500" in caught.value.message
    assert caught.value.code.endswith("_500")
    assert fake.count == 3  # the first try and num_retries retries


def test_timeout_is_retried_then_raises(fake):
    fake.responder = lambda request: {"delay": 30.0, "say": "too late"}  # woken at teardown
    started = time.monotonic()

    with pytest.raises(LLMError) as caught:
        client_for(fake, num_retries=1, timeout=0.5).complete(MESSAGES, [])

    assert "timed out" in caught.value.message.lower() or "timeout" in caught.value.message.lower()
    assert fake.wait_for(2, timeout=10)
    assert fake.count == 2
    assert time.monotonic() - started < 10  # two 0.5 s timeouts and a backoff, not a 30 s answer


@pytest.mark.django_db(transaction=True)
def test_provider_error_ends_the_run(fake, monkeypatch, dispatched):
    from conversations import store
    from conversations.events import AgentErrorEvent, RunFinishedEvent
    from conversations.models import Conversation
    from orchestration.chain.slices import run_slice
    from orchestration.services import conversation_create

    profiles = {
        "fake": {
            "model": "openai/fake-model",
            "api_base": fake.base_url,
            "api_key_env": KEY_ENV,
            "timeout": 5,
            "num_retries": 1,
        }
    }
    monkeypatch.setenv("CANVAS_MODEL_PROFILES", json.dumps(profiles))
    fake.responder = lambda request: {"status": 500, "error": "upstream exploded"}

    conversation = conversation_create(owner=None, prompt="hi", model="fake")
    assert dispatched == [(str(conversation.pk), conversation.run_slice)]

    assert run_slice(str(conversation.pk), conversation.run_slice) is None

    conversation = Conversation.objects.get(pk=conversation.pk)
    assert conversation.status == "error"
    events = [s.event for s in store.load(conversation.pk)]
    errors = [e for e in events if isinstance(e, AgentErrorEvent)]
    assert len(errors) == 1
    assert "upstream exploded" in errors[0].message
    assert "500" in errors[0].message
    assert isinstance(events[-1], RunFinishedEvent)
    assert events[-1].status == "error"
    assert fake.count == 2
    assert len(dispatched) == 1  # the run ended: no next slice was enqueued


def test_a_bad_request_is_not_retried(fake):
    fake.responder = lambda request: {"status": 400, "error": "messages must not be empty"}
    with pytest.raises(LLMError) as caught:
        client_for(fake, num_retries=3).complete(MESSAGES, [])
    assert "messages must not be empty" in caught.value.message
    assert fake.count == 1


def test_a_200_answer_with_a_malformed_body_is_a_bad_response(fake):
    fake.responder = lambda request: {"status": 200, "body": {"choices": "not a list"}}

    with pytest.raises(LLMError) as caught:
        client_for(fake, num_retries=0).complete(MESSAGES, [])

    assert caught.value.code == "llm_bad_response", caught.value.message[:300]
    assert "500" not in caught.value.code, caught.value.message
