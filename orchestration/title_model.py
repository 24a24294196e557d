"""A conversation's title written by its own model, for teams that turn it on
(Team.model_titles): one small call on a worker, instead of the prompt's first line.

The runner asks for it (`title_request`) once the team's UserPromptSubmit hooks have let a
message through, so no prompt reaches a model, even for a title, before the hooks have
passed it. The task (`title_write`) works only from the log and the row: the first user
message must be checked, and the title must still be the default one made from it, so a
person's own title is never replaced (the UPDATE is conditional on the title it read, which
also covers a rename during the call). The answer is redacted like every title and its cost
goes on the team's month. A failed call keeps the default title and logs the error's code,
never the prompt or the answer.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace

from celery import current_app
from django.utils import timezone

from conversations import store
from conversations.events import UserMessageCheckedEvent, UserMessageEvent
from conversations.models import Conversation
from teams.budget import spend_add

from .chain.dispatch import SEND_RETRY_POLICY
from .profile_checks import CALL_TIMEOUT_SECONDS
from .services import redacted_title
from .titles import TITLE_INSTRUCTION, TITLE_PROMPT_CHARS, default_title, model_title

logger = logging.getLogger(__name__)

TITLE_TASK = "orchestration.write_title"
FIRST_EVENTS = 20
"""The first message and its check sit near the start of the log; no need to read it all."""


def title_request(conversation_id: uuid.UUID | str) -> None:
    """Send a title task when the conversation's team writes titles with the model. Called
    after a prompt check passed; the task itself decides whether a title is still due, so
    sending one too many costs a query, never a second title."""
    wanted = Conversation.objects.filter(pk=conversation_id, team__model_titles=True).exists()
    if not wanted:
        return
    try:
        current_app.send_task(
            TITLE_TASK, args=[str(conversation_id)], retry=True, retry_policy=SEND_RETRY_POLICY
        )
    except Exception:  # a title is a nicety: the run goes on with the default one
        logger.warning("title task for conversation %s not sent", conversation_id, exc_info=True)


def _first_checked_prompt(conversation_id: str) -> str | None:
    first: UserMessageEvent | None = None
    for stored in store.load(conversation_id, limit=FIRST_EVENTS):
        event = stored.event
        if first is None and isinstance(event, UserMessageEvent):
            first = event
        if first and isinstance(event, UserMessageCheckedEvent) and first.id in event.message_ids:
            return first.text
    return None


def title_write(conversation_id: str) -> str | None:
    """On a worker: ask the conversation's model for a title and set it if the default title
    is still there. Returns the title set, or None (not wanted, not due, or the call failed)."""
    from .step.llm import LLMError, model_client
    from .step.profiles import UnknownProfileError, profile_get, profile_with_api_key

    row = Conversation.objects.select_related("team").filter(pk=conversation_id).first()
    if row is None or not row.team.model_titles:
        return None
    prompt = _first_checked_prompt(conversation_id)
    if prompt is None or row.title != redacted_title(row.team, default_title(prompt)):
        return None
    try:
        profile = profile_with_api_key(profile_get(row.model, row.team_id))
        client = model_client(
            replace(profile, num_retries=0, timeout=min(profile.timeout, CALL_TIMEOUT_SECONDS))
        )
        answer = client.complete(
            [
                {"role": "system", "content": TITLE_INSTRUCTION},
                {"role": "user", "content": prompt[:TITLE_PROMPT_CHARS]},
            ],
            [],
        )
    except (LLMError, UnknownProfileError) as exc:
        logger.warning(
            "no model title for conversation %s: %s", conversation_id,
            getattr(exc, "code", type(exc).__name__),
        )  # fmt: skip
        return None
    if answer.usage.cost_usd:
        spend_add(row.team_id, answer.usage.cost_usd)
    title = redacted_title(row.team, model_title(answer.content))
    if not title:
        return None
    written = Conversation.objects.filter(pk=row.pk, title=row.title).update(
        title=title, updated_at=timezone.now()
    )
    return title if written else None
