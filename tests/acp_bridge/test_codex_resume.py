"""The real Codex ACP adapter kept warm and resumed (issue 28): its second turn goes to the
same process and session; once that process is gone (the pool closed, as a worker's shutdown
does) the next turn loads the session with session/load from the agent's home, kept across
turns, and the model sees the earlier turns from Codex's own record (the command's output
included), not a transcript we replay. Each turn's command is approved in our inbox.
"""

from __future__ import annotations

import pytest

from conversations.events import AcpSessionEvent, AcpTurnEvent, Status
from orchestration import services
from orchestration.external import pool
from tests.acp_bridge.codex_turns import allow_when_asked, codex_pids, written
from tests.acp_bridge.fake_openai_responses import OUTPUT, FakeResponses
from tests.acp_bridge.turns import drive_in_thread, join_clean, of, row

pytestmark = [pytest.mark.acp, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]


def approved_turn(conversation, fake: FakeResponses, dispatched, user) -> None:
    """Run the pending turn, allowing its command once when asked."""
    turns = len(of(conversation, AcpTurnEvent))
    turn = drive_in_thread(dispatched)
    allow_when_asked(conversation, fake, user)
    join_clean(turn, timeout=90)
    assert len(of(conversation, AcpTurnEvent)) == turns + 1
    assert row(conversation).status == Status.FINISHED
    assert written(conversation).read_text() == OUTPUT
    written(conversation).unlink()


def model_input(fake: FakeResponses, turn: int) -> list[dict]:
    """The input items of the model call that opened turn `turn` (1-based)."""
    opening = [r.body for r in fake.requests if r.kind == "tool_call"]
    return opening[turn - 1]["input"]


def said(items: list[dict]) -> list[str]:
    """The text of every user message among model input items."""
    return [
        part.get("text", "")
        for item in items
        if item.get("role") == "user" and isinstance(item.get("content"), list)
        for part in item["content"]
    ]


def test_codex_answers_warm_then_resumes_with_session_load(user, codex, fake_openai, dispatched):
    conversation = codex()
    approved_turn(conversation, fake_openai, dispatched, user)
    kept = pool.kept_agent(str(conversation.pk))
    assert kept is not None and kept.agent.pid is not None
    session_id = kept.session_id
    (pid,) = codex_pids()

    services.conversation_post_message(
        conversation_id=conversation.pk, text="Write it again.", sender=user
    )
    approved_turn(conversation, fake_openai, dispatched, user)
    assert codex_pids() == [pid]  # the same Codex process answered
    assert [(s.how, s.session_id) for s in of(conversation, AcpSessionEvent)] == [
        ("new", session_id)
    ]

    pool.close_all()  # a worker restart: the process is gone, its home is not
    assert codex_pids() == []
    services.conversation_post_message(
        conversation_id=conversation.pk, text="Once more, please.", sender=user
    )
    approved_turn(conversation, fake_openai, dispatched, user)
    sessions = of(conversation, AcpSessionEvent)
    assert [(s.how, s.session_id) for s in sessions] == [
        ("new", session_id), ("loaded", session_id),
    ]  # fmt: skip
    assert sessions[1].load_supported

    # What the model saw opening turn 3: Codex's own history, the earlier outputs included,
    # then only the new message (no transcript of ours in it).
    items = model_input(fake_openai, 3)
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    assert len(outputs) == 2 and all(OUTPUT in str(o.get("output")) for o in outputs), items
    texts = said(items)
    assert texts[-1] == "Once more, please." and "Write it again." in texts
    assert not any("continuing a conversation" in text for text in texts)
