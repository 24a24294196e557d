"""What the agent is told besides its instructions: the date, its workspace, the secret names
it may use, the repository's instructions labelled untrusted; recorded once per run and put
after the static system prompt (with a cache marker for Anthropic models)."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from conversations import store
from conversations.events import RunStartedEvent, SystemContextEvent, UserMessageEvent
from orchestration import services
from orchestration.step.context import (
    build_context,
    context_due,
    explicit_cache_markers,
    with_context,
)
from teams.secrets import secret_create
from tests.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_context_names_the_date_workspace_secrets_and_quotes_repository_files(tmp_path):
    (tmp_path / "AGENTS.md").write_text("Run `make test` before you finish.\n")
    (tmp_path / ".openhands" / "microagents").mkdir(parents=True)
    (tmp_path / ".openhands" / "microagents" / "repo.md").write_text("Use tabs.")
    (tmp_path / "CLAUDE.md").symlink_to("/etc/passwd")  # a link is never followed
    event = build_context(root=tmp_path, shown_root="/workspace", kind="docker",
                          secret_names=["B_KEY", "A_KEY"], today=date(2026, 12, 2))  # fmt: skip
    text = event.text
    assert "Today is 2026-12-02 (UTC)." in text
    assert "Your workspace is /workspace, in a Docker container" in text
    assert "($NAME): A_KEY, B_KEY." in text
    assert event.sources == ["AGENTS.md", ".openhands/microagents/repo.md"]
    assert '<repository_instructions source="AGENTS.md" trust="untrusted">\nRun `make test`' in text
    assert "not from the user or the team" in text
    assert "root:" not in text


def test_a_huge_instructions_file_is_cut(tmp_path):
    (tmp_path / "AGENTS.md").write_text("x" * 50_000)
    event = build_context(root=tmp_path, shown_root=str(tmp_path), kind="local",
                          secret_names=[], today=date(2026, 1, 1))  # fmt: skip
    assert "[... cut at 20000 characters]" in event.text and len(event.text) < 21_500
    assert "secrets" not in event.text.lower().split("</context>")[0]


def test_context_is_due_once_per_run():
    context = SystemContextEvent(text="c")
    assert context_due([])
    assert context_due([RunStartedEvent()])
    assert not context_due([RunStartedEvent(), context, UserMessageEvent(text="more")])
    assert context_due([RunStartedEvent(), context, RunStartedEvent()])


def test_the_context_follows_the_static_prompt_with_a_marker_where_it_helps():
    messages = [{"role": "system", "content": "static"}, {"role": "user", "content": "hi"}]
    context = SystemContextEvent(text="dynamic")
    plain = with_context(messages, context, cache=False)
    assert plain[0] == {"role": "system", "content": "static\n\ndynamic"}
    marked = with_context(messages, context, cache=True)
    assert marked[0]["content"] == [
        {"type": "text", "text": "static", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "dynamic"},
    ]
    assert messages[0] == {"role": "system", "content": "static"}  # the history's stays
    assert explicit_cache_markers("anthropic/claude-sonnet-4") and not explicit_cache_markers(
        "openai/gpt-4o"
    )


def test_a_run_records_its_context_after_the_workspace_is_filled(user, team, dispatched):
    secret_create(by=user, team=team, name="DEPLOY_TOKEN", value="tok-123456789", description="")
    prompt = json.dumps({"script": [{"tool": "finish", "args": {"message": "ok"}}]})
    conversation = services.conversation_create(owner=user, model="scripted", prompt=prompt,
                                                workspace="with-agents-md")  # fmt: skip
    Path(conversation.workspace_path, "AGENTS.md").write_text("Always write tests.")
    drive(dispatched)
    contexts = [s.event for s in store.load(conversation.pk)
                if isinstance(s.event, SystemContextEvent)]  # fmt: skip
    assert len(contexts) == 1
    assert "DEPLOY_TOKEN" in contexts[0].text and "tok-123456789" not in contexts[0].text
    assert "Always write tests." in contexts[0].text
    services.conversation_post_message(conversation_id=conversation.pk, text=prompt, sender=user)
    drive(dispatched)
    assert sum(isinstance(s.event, SystemContextEvent) for s in store.load(conversation.pk)) == 2


def test_the_condenser_counts_the_context_beside_the_view():
    from types import SimpleNamespace

    from orchestration.step.condense import Condenser

    history = SimpleNamespace(events=[SystemContextEvent(text="x" * 40_000)], view_tokens=2_000,
                              last_prompt_tokens=0)  # fmt: skip
    condenser = Condenser(SimpleNamespace(history=history))
    condenser.__dict__["limit"] = 14_000  # a cached_property, set as the profile would
    assert condenser.context_tokens == 10_000
    assert condenser.due()  # 2,000 + 10,000 >= 80% of 14,000
    history.events = []
    fresh = Condenser(SimpleNamespace(history=history))
    fresh.__dict__["limit"] = 14_000
    assert not fresh.due()
