"""A model profile without an API key: the run's error says so in words, at once.

LiteLLM reports a missing key differently per provider (OpenAI's as a made-up HTTP 500
"Missing credentials", Anthropic's as a 401, Gemini's as a connection error); none reaches
the network and none is worth a retry.
"""

from __future__ import annotations

import pytest

from orchestration.step.llm import NO_API_KEY, LiteLLMClient, LLMError
from orchestration.step.profiles import ModelProfile

KEYS = ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY",
        "GOOGLE_API_KEY")  # fmt: skip


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("gpt-4o-mini", "openai"),
        ("anthropic/claude-3-5-haiku-20241022", "anthropic"),
        ("gemini/gemini-1.5-flash", "gemini"),
    ],
)
def test_a_missing_key_names_the_provider_and_is_not_retried(monkeypatch, model, provider):
    for name in KEYS:
        monkeypatch.delenv(name, raising=False)
    sleeps: list[float] = []
    client = LiteLLMClient(
        ModelProfile(name="p", model=model, timeout=5, num_retries=3), sleep=sleeps.append
    )
    with pytest.raises(LLMError) as caught:
        client.complete([{"role": "user", "content": "hi"}], [])
    assert caught.value.code == NO_API_KEY
    assert str(caught.value).startswith(f"No API key for provider {provider}:")
    assert "500" not in str(caught.value) and "InternalServerError" not in str(caught.value)
    assert sleeps == []
