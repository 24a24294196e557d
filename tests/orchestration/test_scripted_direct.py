"""Runs play the scripted and demo models without LiteLLM (`model_client`); what they get must
be what LiteLLM's own path makes of the same turns (test_scripted drives that path), errors
included, so a run's events are the same either way."""

from __future__ import annotations

import json

import pytest

from orchestration.step.llm import LiteLLMClient, LLMError, model_client
from orchestration.step.profiles import BUILTIN_PROFILES, ModelProfile
from orchestration.step.scripted import ScriptedClient
from orchestration.step.summary_prompt import summary_request
from orchestration.titles import TITLE_INSTRUCTION
from tests.runs import script


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def answer(client, messages: list[dict]) -> tuple:
    try:
        response = client.complete(messages, [])
    except LLMError as exc:
        return ("error", type(exc).__name__, exc.code, exc.message)
    return ("ok", response)


CASES = {
    "tool": [user(script({"tool": "think", "args": {"thought": "a"}, "thought": "hm"}))],
    "parallel tools": [
        user(
            script(
                {
                    "tools": [
                        {"tool": "terminal", "args": {"command": "ls"}},
                        {"tool": "think", "args": {"thought": "b"}},
                    ]
                }
            )
        )
    ],  # fmt: skip
    "no tools": [user(script({"tools": [], "thought": "nothing to call"}))],
    "broken arguments": [user(script({"tool": "terminal", "args": "{not json"}))],
    "say": [user(script({"say": "hello"}))],
    "not a script": [user("hello")],
    "finished": [user(script({"say": "a"})), {"role": "assistant", "content": "a"}],
    "fail": [user(script({"fail": "the provider said no"}))],
    "context window": [user(json.dumps({"script": [{"say": "a"}], "context_window": 1}))],
    "title": [{"role": "system", "content": TITLE_INSTRUCTION}, user(script({"say": "a"}))],
    "summary fails": [
        user(json.dumps({"script": [{"say": "a"}], "summary": {"error": "no summary"}}))
    ],
}


@pytest.mark.parametrize("model", ["scripted", "demo"])
@pytest.mark.parametrize("case", list(CASES))
def test_answers_as_litellms_path_does(model, case):
    messages = CASES[case]
    if case == "summary fails":
        messages = summary_request(
            task=messages[0]["content"], previous=None, forgotten=[], max_chars=1000
        )
    profile = BUILTIN_PROFILES[model]
    direct, through = (
        answer(ScriptedClient(profile), messages),
        answer(LiteLLMClient(profile), messages),
    )
    assert direct == through


def test_runs_get_the_direct_client_for_the_scripted_models_only(settings):
    settings.CANVAS_SCRIPTED_THROUGH_LITELLM = False  # as `make up` runs them
    assert isinstance(model_client(BUILTIN_PROFILES["scripted"]), ScriptedClient)
    assert isinstance(model_client(BUILTIN_PROFILES["demo"]), ScriptedClient)
    real = model_client(ModelProfile(name="p", model="openai/gpt-4o"))
    assert isinstance(real, LiteLLMClient)


def test_the_suite_plugs_the_scripted_models_in_behind_litellm(settings):
    settings.CANVAS_SCRIPTED_THROUGH_LITELLM = True  # pytest's env sets it for every test
    assert isinstance(model_client(BUILTIN_PROFILES["scripted"]), LiteLLMClient)
    assert isinstance(model_client(BUILTIN_PROFILES["demo"]), LiteLLMClient)
