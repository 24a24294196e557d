"""The real Codex ACP adapter on real Celery workers: the worker runs the turn, Codex's request
waits in our inbox while the worker holds the turn, the approval reaches it there; the second
message goes to the same Codex process on that worker, and after the worker restarts the next
one loads Codex's session from the kept home. The model is the fake Responses API on
127.0.0.1, reached over the host's network (the worker's environment allows it).
"""

from __future__ import annotations

import json

import pytest

from conversations.events import AcpSessionEvent, ActionDecisionEvent, ObservationEvent, Status
from orchestration import services
from orchestration.chain.dispatch import ACP_QUEUE
from tests.acp_bridge.codex_agent import codex_profile
from tests.acp_bridge.codex_turns import allow_when_asked, codex_pids, written
from tests.acp_bridge.fake_openai_responses import OUTPUT, FakeResponses
from tests.acp_bridge.turns import of, row
from tests.conftest import wait_for

pytestmark = [
    pytest.mark.acp, pytest.mark.worker, pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
]  # fmt: skip


def worker_env(fake: FakeResponses) -> dict[str, str]:
    """A worker is a subprocess: its agent profiles and sandbox rules come from its
    environment."""
    return {
        "CANVAS_ACP_AGENTS": json.dumps({"codex": codex_profile(fake.base_url)}),
        "CANVAS_SANDBOX_ALLOW_HOST_NETWORK": "true",
        "CANVAS_UNSANDBOXED_COMMANDS": "false",
    }


def identity(worker) -> str:
    from django.conf import settings

    return f"{settings.CANVAS_WORKER_HOST}:{worker.proc.pid}"


def approve_when_asked(conversation, fake: FakeResponses, user) -> None:
    turns = len(of(conversation, ObservationEvent))
    allow_when_asked(conversation, fake, user)
    wait_for(lambda: row(conversation).status == Status.FINISHED, 90, message="the turn to end")
    (result,) = of(conversation, ObservationEvent)[turns:]
    assert result.content == OUTPUT and not result.is_error
    assert written(conversation).read_text() == OUTPUT
    written(conversation).unlink()


def test_codex_on_a_worker_is_approved_answers_warm_and_loads_after_a_restart(
    start_worker, user, codex, fake_openai
):
    first = start_worker(queues=(ACP_QUEUE,), extra_env=worker_env(fake_openai))
    conversation = codex()
    approve_when_asked(conversation, fake_openai, user)
    (pid,) = codex_pids()
    (opened,) = of(conversation, AcpSessionEvent)
    assert opened.how == "new" and opened.worker == identity(first)
    assert of(conversation, ActionDecisionEvent)[0].by == user.username

    services.conversation_post_message(
        conversation_id=conversation.pk, text="Write it again.", sender=user
    )
    approve_when_asked(conversation, fake_openai, user)
    assert codex_pids() == [pid]
    assert [s.how for s in of(conversation, AcpSessionEvent)] == ["new"]

    first.stop()
    wait_for(lambda: not codex_pids(), 10, message="Codex to end with its worker")
    second = start_worker(queues=(ACP_QUEUE,), extra_env=worker_env(fake_openai))
    services.conversation_post_message(
        conversation_id=conversation.pk, text="Once more, please.", sender=user
    )
    approve_when_asked(conversation, fake_openai, user)
    sessions = of(conversation, AcpSessionEvent)
    assert [(s.how, s.session_id) for s in sessions] == [
        ("new", opened.session_id), ("loaded", opened.session_id),
    ]  # fmt: skip
    assert sessions[1].worker == identity(second)
