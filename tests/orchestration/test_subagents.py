"""Sub-agents driven slice by slice, as workers would run them: task, delegate and workflow
spawn children as conversations, the parent waits without a worker, the last child to end
answers it, and every refusal is a result the model reads."""

from __future__ import annotations

import json

import pytest

from conversations import store
from conversations.events import (
    ObservationEvent,
    RunFinishedEvent,
    Status,
    StatusChangeEvent,
    SubagentsSettledEvent,
    SubagentsSpawnedEvent,
)
from conversations.models import Conversation
from orchestration import services
from teams.models import Policy
from tests.runs import drive, script

pytestmark = pytest.mark.django_db(transaction=True)


def say(text: str) -> str:
    return script({"tool": "finish", "args": {"message": text}})


def start(prompt: str, **kwargs) -> Conversation:
    return services.conversation_create(owner=None, model="scripted", prompt=prompt, **kwargs)


def events(conversation) -> list:
    return [s.event for s in store.load(conversation.pk)]


def results(conversation) -> list[ObservationEvent]:
    return [e for e in events(conversation) if isinstance(e, ObservationEvent)]


def row(conversation) -> Conversation:
    return Conversation.objects.get(pk=conversation.pk)


def test_task_runs_a_child_whose_answer_is_the_parents_result(dispatched):
    parent = start(
        script(
            {"tool": "task", "args": {"subagent_type": "general", "prompt": say("42"),
                                      "description": "the answer"}},
            {"tool": "finish", "args": {"message": "parent done"}},
        )
    )  # fmt: skip
    drive(dispatched)
    assert row(parent).status == Status.FINISHED
    child = Conversation.objects.get(parent=parent)
    assert (child.name, child.subagent_type, child.status) == ("the answer", "general", "finished")
    assert child.team_id == parent.team_id and child.workspace_path == parent.workspace_path
    task_result = next(o for o in results(parent) if o.tool == "task")
    assert task_result.content == "42" and not task_result.is_error
    statuses = [e.status for e in events(parent) if isinstance(e, StatusChangeEvent)]
    assert statuses == [
        Status.RUNNING,
        Status.WAITING_FOR_SUBAGENTS,
        Status.RUNNING,
        Status.FINISHED,
    ]
    assert child.parent_action_id == next(
        e.tool_call_id for e in events(parent) if isinstance(e, SubagentsSpawnedEvent)
    )
    finished = [e for e in events(child) if isinstance(e, RunFinishedEvent)]
    assert finished[-1].worker  # which worker process ended the child's run


def test_delegate_runs_named_children_and_lists_each(dispatched):
    tasks = [{"name": n, "prompt": say(f"answer {n}")} for n in ("a", "b", "c")]
    parent = start(script({"tool": "delegate", "args": {"tasks": tasks}}, {"say": "ok"}))
    drive(dispatched)
    assert row(parent).status == Status.FINISHED
    assert sorted(Conversation.objects.filter(parent=parent).values_list("name", flat=True)) == [
        "a", "b", "c",
    ]  # fmt: skip
    result = next(o for o in results(parent) if o.tool == "delegate")
    assert not result.is_error
    assert "3 of 3 tasks finished." in result.content
    for name in ("a", "b", "c"):
        assert f"## {name} (finished)\nanswer {name}" in result.content
    settled = [e for e in events(parent) if isinstance(e, SubagentsSettledEvent)]
    assert len(settled) == 1 and [r.status for r in settled[0].results] == ["finished"] * 3


def test_a_failed_child_reaches_the_parent_as_a_failure(dispatched):
    # The child's model call fails: an unknown tool schema is no failure, so use a limit.
    child_prompt = script({"tool": "think", "args": {"thought": "a"}}, {"say": "partial"})
    parent = start(
        script(
            {"tool": "task", "args": {"prompt": child_prompt}},
            {"tool": "finish", "args": {"message": "after"}},
        ),
        max_iterations=1,
    )
    drive(dispatched)
    child = Conversation.objects.get(parent=parent)
    assert child.status == Status.ERROR  # its one iteration was the think call
    result = next(o for o in results(parent) if o.tool == "task")
    assert result.is_error
    assert "did not finish: it ended error" in result.content
    assert "max iterations" in result.content


def test_workflow_maps_then_reduces_by_replay(dispatched, tmp_path):
    source = (
        "parts = await wf.map_agents([P1, P2, P3, P4])\nreturn await wf.reduce_agent(parts, R)\n"
    )
    prompts = {f"P{i}": json.dumps(say(f"part {i}")) for i in range(1, 5)}
    reduce_prompt = json.dumps(say("all four"))
    for name, value in prompts.items():
        source = source.replace(name, value)
    source = source.replace("R)", f"{reduce_prompt})")
    parent = start(script({"tool": "workflow", "args": {"script": source}}, {"say": "end"}))
    drive(dispatched)
    assert row(parent).status == Status.FINISHED
    children = Conversation.objects.filter(parent=parent)
    assert children.count() == 5
    spawned = [e for e in events(parent) if isinstance(e, SubagentsSpawnedEvent)]
    assert [len(e.children) for e in spawned] == [4, 1]  # map at once, then the reduce
    result = next(o for o in results(parent) if o.tool == "workflow")
    assert (result.content, result.is_error) == ("all four", False)
    reducer = children.get(pk=spawned[1].children[0].conversation_id)
    prompt = next(e.text for e in events(reducer) if e.type == "message.user")
    assert all(f"part {i}" in prompt for i in range(1, 5))  # the map's answers, in order


def test_a_refused_workflow_script_names_the_rule(dispatched):
    parent = start(
        script(
            {"tool": "workflow", "args": {"script": "import os\nreturn 1"}},
            {"tool": "workflow", "args": {"script": "while True:\n    pass"}},
            {"say": "end"},
        )
    )
    drive(dispatched)
    refused, runaway = [o for o in results(parent) if o.tool == "workflow"]
    assert refused.is_error and "(no import)" in refused.content
    assert runaway.is_error and ("CPU" in runaway.content or "longer than" in runaway.content)
    assert not Conversation.objects.filter(parent=parent).exists()
    assert row(parent).status == Status.FINISHED


def test_refusals_are_results_the_model_reads(dispatched, team_id):
    Policy.objects.create(team_id=team_id, max_children_per_call=2)
    tasks = [{"name": n, "prompt": say(n)} for n in ("a", "b", "c")]
    parent = start(
        script(
            {"tool": "delegate", "args": {"tasks": tasks}},
            {"tool": "task", "args": {"subagent_type": "nobody", "prompt": say("x")}},
            {"tool": "task", "args": {"prompt": ""}},
            {"tool": "finish", "args": {"message": "gave up"}},
        ),
        team=team_id,
    )
    drive(dispatched)
    assert row(parent).status == Status.FINISHED
    assert not Conversation.objects.filter(parent=parent).exists()
    delegate, unknown, empty = [o for o in results(parent) if o.tool in ("delegate", "task")]
    assert delegate.is_error and "at most 2 per call" in delegate.content
    assert unknown.is_error and "Unknown sub-agent type 'nobody'" in unknown.content
    assert empty.is_error and "prompt" in empty.content


def test_depth_limit_takes_the_spawning_tools_from_the_last_level(dispatched, team_id):
    Policy.objects.create(team_id=team_id, max_subagent_depth=1)
    grandchild = say("too deep")
    child = script(
        {"tool": "task", "args": {"prompt": grandchild}},
        {"tool": "finish", "args": {"message": "child done"}},
    )
    parent = start(script({"tool": "task", "args": {"prompt": child}}, {"say": "ok"}), team=team_id)
    drive(dispatched)
    kid = Conversation.objects.get(parent=parent)
    assert "task" not in kid.agent_config["tools"]
    assert kid.agent_config["depth"] == 1
    refused = next(o for o in results(kid) if o.tool == "task")
    assert refused.is_error and "Unknown tool 'task'" in refused.content
    assert not Conversation.objects.filter(parent=kid).exists()
    assert row(parent).status == Status.FINISHED


def test_sub_agents_forbidden_by_policy_leave_the_tools_out(team_id):
    Policy.objects.create(team_id=team_id, subagents_allowed=False)
    conversation = start(say("x"), team=team_id)
    assert not {"task", "delegate", "workflow"} & set(conversation.agent_config["tools"])
