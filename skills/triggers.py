"""Which skills a person's message asks for by a trigger word: whole words or phrases, any
case, so "deploy" matches "Deploy the app" but not "redeployment"."""

from __future__ import annotations

import re
from collections.abc import Iterable

from .catalog import Skill


def _pattern(trigger: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w]){re.escape(trigger)}(?![\w])", re.IGNORECASE)


def triggered(text: str, skills: Iterable[Skill]) -> list[tuple[Skill, str]]:
    """The skills `text` triggers, each with the trigger that matched, in catalog order."""
    found = []
    for skill in skills:
        for trigger in skill.triggers:
            if _pattern(trigger).search(text):
                found.append((skill, trigger))
                break
    return found
