"""How big the View is in tokens, and how big the model's context is.

The estimate is kept running (orchestration.step.history adds each new View event's estimate
and recounts only the View when a condensation rebuilds it), so the trigger check costs the
same at step 10 and step 10,000: nothing re-tokenises the whole history. It is a character
count, not the model's tokenizer: cheap, and what it misjudges the provider's own refusal
(a context-window error) catches, which condenses too.
"""

from __future__ import annotations

from functools import lru_cache

from conversations.events import (
    ActionEvent,
    AgentMessageEvent,
    AnyEvent,
    CondensationEvent,
    ObservationEvent,
    SystemPromptEvent,
    UserMessageEvent,
)

from .profiles import SCRIPTED_MODELS, ModelProfile

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4
"""Tokens a chat message costs beyond its text (role, separators), as OpenAI counts them."""
TRIGGER_FRACTION = 0.8
"""Condense once the View's estimate reaches this share of the context limit."""


def event_tokens(event: AnyEvent) -> int:
    """A View event's estimated share of the prompt, in tokens."""
    if isinstance(event, SystemPromptEvent):
        text = event.content + str(event.tools)  # the tool schemas go with every request
    elif isinstance(event, UserMessageEvent | AgentMessageEvent):
        text = event.text
    elif isinstance(event, ActionEvent):
        text = event.thought + event.tool + event.arguments
    elif isinstance(event, ObservationEvent):
        text = event.content
    elif isinstance(event, CondensationEvent):
        text = event.summary
    else:
        return 0
    return len(text) // CHARS_PER_TOKEN + MESSAGE_OVERHEAD


def context_limit(profile: ModelProfile) -> int | None:
    """The model's input limit in tokens: the profile's own setting, else LiteLLM's model
    map (read locally with LITELLM_LOCAL_MODEL_COST_MAP); None when neither knows."""
    if profile.max_input_tokens:
        return profile.max_input_tokens
    if profile.model in SCRIPTED_MODELS:  # not in the map; a script sets its own window
        return None
    return _litellm_limit(profile.model)


@lru_cache(maxsize=64)
def _litellm_limit(model: str) -> int | None:
    from .llm import litellm_module  # a real model's: the web process never imports LiteLLM

    litellm = litellm_module()

    try:
        info = litellm.get_model_info(model)
    except Exception:  # not in the map (our scripted models, a private deployment)
        return None
    limit = info.get("max_input_tokens") or info.get("max_tokens")
    return int(limit) if limit else None
