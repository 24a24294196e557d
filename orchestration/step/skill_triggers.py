"""Skills a person's message asks for by a trigger word, loaded before the model reads it.

Only messages the model has not answered yet are looked at (those after its last output), so
each message is read for triggers once in practice; what was loaded is read back from the log
(a `skill:NAME` message after the one that triggered it), so a runner that crashed after
loading never loads a skill twice. A skill already loaded in the conversation's View is not
loaded again.
"""

from __future__ import annotations

from collections.abc import Sequence

from conversations.events import (
    SKILL_SENDER_PREFIX,
    ActionEvent,
    AgentMessageEvent,
    AnyEvent,
    UserMessageEvent,
)
from skills.catalog import Catalog
from skills.triggers import triggered

from ..tools.invoke_skill import skill_text


def _unread(events: Sequence[AnyEvent]) -> list[UserMessageEvent]:
    for index in range(len(events) - 1, -1, -1):
        if isinstance(events[index], AgentMessageEvent | ActionEvent):
            events = events[index + 1 :]
            break
    return [e for e in events if isinstance(e, UserMessageEvent)]


def skills_to_load(view: Sequence[AnyEvent], catalog: Catalog) -> list[UserMessageEvent]:
    """The skill messages to append now (none when nothing new asks for a skill)."""
    if not catalog.skills:
        return []
    loaded = {
        (e.sender or "").removeprefix(SKILL_SENDER_PREFIX)
        for e in view if isinstance(e, UserMessageEvent) and e.from_skill
    }  # fmt: skip
    found: list[UserMessageEvent] = []
    for message in _unread(view):
        if not message.needs_prompt_check:
            continue
        for skill, trigger in triggered(message.text, catalog.skills):
            if skill.name in loaded:
                continue
            loaded.add(skill.name)
            found.append(
                UserMessageEvent(
                    text=skill_text(skill, how=f"by the trigger '{trigger}'"),
                    sender=f"{SKILL_SENDER_PREFIX}{skill.name}",
                )
            )
    return found
