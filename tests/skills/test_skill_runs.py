"""Skills in a run: the agent loads one with invoke_skill, and a trigger word in a person's
message loads one before the model reads it; driven slice by slice with the scripted model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conversations import store
from conversations.events import ObservationEvent, UserMessageCheckedEvent, UserMessageEvent
from orchestration import services
from orchestration.tools.base import tool_schema
from orchestration.tools.invoke_skill import InvokeSkillTool, skill_schema
from skills.catalog import available_skills
from skills.services import skill_create
from teams.policies import policy_update
from tests.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)

SKILL_MD = """---
name: deploy
description: How this repository is deployed.
---
Run make deploy, then check /health.
"""


def _events(conversation_id):
    return [s.event for s in store.load(conversation_id)]


def test_the_agent_loads_a_repository_skill_labelled_untrusted(user, dispatched):
    prompt = json.dumps({"script": [
        {"tool": "invoke_skill", "args": {"name": "deploy"}},
        {"tool": "invoke_skill", "args": {"name": "nope"}},
        {"tool": "finish", "args": {"message": "done"}},
    ]})  # fmt: skip
    conversation = services.conversation_create(owner=user, model="scripted", prompt=prompt,
                                                workspace="skills-repo")  # fmt: skip
    folder = Path(conversation.workspace_path, ".agents", "skills", "deploy")
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD)
    drive(dispatched)
    loaded, missing = [e for e in _events(conversation.pk)
                       if isinstance(e, ObservationEvent) and e.tool == "invoke_skill"]  # fmt: skip
    assert "Run make deploy, then check /health." in loaded.content
    assert 'trust="untrusted repository content' in loaded.content and not loaded.is_error
    assert missing.is_error and "Skills here: deploy." in missing.content


def test_the_schema_names_the_skills(user, team, tmp_path):
    skill_create(by=user, team=team, name="review", description="How we review.", body="b")
    catalog = available_skills(team_id=team.pk, workspace_root=None)
    schema = skill_schema(tool_schema(InvokeSkillTool()), catalog)
    assert "- review: How we review." in schema["function"]["description"]
    assert schema["function"]["parameters"]["properties"]["name"]["enum"] == ["review"]


def test_a_trigger_word_loads_the_skill_before_the_model_reads_the_message(user, team, dispatched):
    skill_create(by=user, team=team, name="deploy", description="How we deploy.",
                 body="Use the blue-green script.", triggers=["deploy"])  # fmt: skip
    prompt = json.dumps({"script": [{"tool": "finish", "args": {"message": "ok"}}],
                         "note": "please deploy it"})  # fmt: skip
    conversation = services.conversation_create(owner=user, model="scripted", prompt=prompt)
    drive(dispatched)
    events = _events(conversation.pk)
    skill_messages = [e for e in events if isinstance(e, UserMessageEvent) and e.from_skill]
    assert len(skill_messages) == 1
    (loaded,) = skill_messages
    assert loaded.sender == "skill:deploy" and "Use the blue-green script." in loaded.text
    assert "loaded=\"by the trigger 'deploy'\"" in loaded.text
    assert 'trust="written by the team' in loaded.text
    checked = {i for e in events if isinstance(e, UserMessageCheckedEvent) for i in e.message_ids}
    assert loaded.id not in checked  # the person's message was checked; the skill is ours
    # A second message with the trigger does not load it again.
    services.conversation_post_message(conversation_id=conversation.pk, text="deploy again",
                                       sender=user)  # fmt: skip
    drive(dispatched)
    assert sum(isinstance(e, UserMessageEvent) and e.from_skill
               for e in _events(conversation.pk)) == 1  # fmt: skip


def test_a_policy_without_invoke_skill_loads_no_skill(user, team, dispatched):
    skill_create(by=user, team=team, name="deploy", description="d", body="b",
                 triggers=["deploy"])  # fmt: skip
    policy_update(by=user, team=team, allowed_tools=["think", "finish"])
    prompt = json.dumps({"script": [{"tool": "finish", "args": {"message": "ok"}}],
                         "note": "deploy"})  # fmt: skip
    conversation = services.conversation_create(owner=user, model="scripted", prompt=prompt)
    drive(dispatched)
    assert not any(isinstance(e, UserMessageEvent) and e.from_skill
                   for e in _events(conversation.pk))  # fmt: skip
