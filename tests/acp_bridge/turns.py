"""Driving ACP turns in tests: a site profile for the fixture agent, and small readers."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

from conversations import store
from conversations.models import Conversation
from orchestration import services
from tests.runs import drive

AGENT = str(Path(__file__).with_name("agent_fixture.py"))
FIXTURE = "fixture"


def fixture_profile(**extra: Any) -> dict[str, Any]:
    """CANVAS_ACP_AGENTS entry running agent_fixture.py in the sandbox (the venv, its
    interpreter and the fixture's folder read-only)."""
    return {
        "command": sys.executable,
        "args": [AGENT],
        "readonly": [sys.prefix, sys.base_prefix, str(Path(AGENT).parent)],
        **extra,
    }


def use_fixture(settings, **extra: Any) -> None:
    settings.CANVAS_ACP_AGENTS = {FIXTURE: fixture_profile(**extra)}


def start(user, prompt: str, **kwargs: Any) -> Conversation:
    return services.conversation_create(
        owner=user, prompt=prompt, model="demo", agent=FIXTURE, **kwargs
    )


def events(conversation: Conversation | str) -> list:
    pk = getattr(conversation, "pk", conversation)
    return [s.event for s in store.load(pk)]


def of(conversation, cls) -> list:
    return [e for e in events(conversation) if isinstance(e, cls)]


def row(conversation) -> Conversation:
    return Conversation.objects.get(pk=conversation.pk)


def drive_in_thread(dispatched: list) -> threading.Thread:
    """Run the turn on another thread (it waits for decisions the test makes)."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            drive(dispatched)
        except BaseException as exc:  # surfaced by join_clean
            errors.append(exc)
        finally:
            from django.db import connection

            connection.close()

    thread = threading.Thread(target=target, daemon=True)
    thread.errors = errors  # type: ignore[attr-defined]
    thread.start()
    return thread


def join_clean(thread: threading.Thread, timeout: float = 60) -> None:
    thread.join(timeout)
    assert not thread.is_alive(), "the turn did not end"
    errors = thread.errors  # type: ignore[attr-defined]
    if errors:
        raise errors[0]
