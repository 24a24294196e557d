"""Trees of sub-agents on real Celery worker processes: task, delegate and a workflow (map over
four inputs, then reduce) with the scripted model; one worker process of concurrency one
still finishes a parent with three children (the parent never holds a worker while it waits);
two worker processes both run children."""

from __future__ import annotations

import json

import pytest

from conversations import store
from conversations.events import ObservationEvent, RunFinishedEvent
from conversations.models import Conversation
from orchestration import services
from tests.conftest import wait_for
from tests.runs import script

pytestmark = pytest.mark.worker


def finish(text: str, *before: dict) -> str:
    return script(*before, {"tool": "finish", "args": {"message": text}})


def status_of(conversation) -> str:
    return Conversation.objects.get(pk=conversation.pk).status


def results_of(conversation, tool: str) -> list[ObservationEvent]:
    return [
        s.event for s in store.load(conversation.pk)
        if isinstance(s.event, ObservationEvent) and s.event.tool == tool
    ]  # fmt: skip


def workers_of(children) -> set[str]:
    """The worker processes that ended each child's run (run.finished names them)."""
    return {
        next(s.event.worker for s in reversed(store.load(c.pk))
             if isinstance(s.event, RunFinishedEvent))
        for c in children
    }  # fmt: skip


def test_task_delegate_and_workflow_on_a_worker(start_worker):
    start_worker()
    parts = [finish(f"part {i}") for i in range(4)]
    workflow = (
        f"parts = await wf.map_agents({json.dumps(parts)})\n"
        f"return await wf.reduce_agent(parts, {json.dumps(finish('reduced'))})\n"
    )
    parent = services.conversation_create(
        owner=None, model="scripted",
        prompt=script(
            {"tool": "task", "args": {"prompt": finish("42"), "description": "answer"}},
            {"tool": "delegate", "args": {"tasks": [
                {"name": n, "prompt": finish(f"done {n}")} for n in ("x", "y", "z")]}},
            {"tool": "workflow", "args": {"script": workflow}},
            {"tool": "finish", "args": {"message": "all three"}},
        ),
    )  # fmt: skip
    wait_for(lambda: status_of(parent) == "finished", 90, message="the parent to finish")
    assert results_of(parent, "task")[0].content == "42"
    assert "3 of 3 tasks finished." in results_of(parent, "delegate")[0].content
    assert results_of(parent, "workflow")[0].content == "reduced"
    children = Conversation.objects.filter(parent=parent)
    assert children.count() == 1 + 3 + 4 + 1
    assert set(children.values_list("status", flat=True)) == {"finished"}


def test_one_worker_of_concurrency_one_finishes_a_parent_with_three_children(start_worker):
    start_worker(pool_args=("-P", "threads", "-c", "1"))
    parent = services.conversation_create(
        owner=None, model="scripted",
        prompt=script(
            {"tool": "delegate", "args": {"tasks": [
                {"name": n, "prompt": finish(n, {"tool": "think", "args": {"thought": n}})}
                for n in ("a", "b", "c")]}},
            {"tool": "finish", "args": {"message": "no deadlock"}},
        ),
    )  # fmt: skip
    wait_for(lambda: status_of(parent) == "finished", 90, message="the parent to finish")
    assert "3 of 3 tasks finished." in results_of(parent, "delegate")[0].content


def test_two_worker_processes_both_run_children(start_worker):
    for _ in range(2):
        start_worker(pool_args=("-P", "threads", "-c", "1"))
    slow = {"tool": "terminal", "args": {"command": "sleep 1"}}
    parent = services.conversation_create(
        owner=None, model="scripted",
        prompt=script(
            {"tool": "delegate", "args": {"tasks": [
                {"name": n, "prompt": finish(n, slow)} for n in ("a", "b", "c", "d")]}},
            {"tool": "finish", "args": {"message": "spread"}},
        ),
    )  # fmt: skip
    wait_for(lambda: status_of(parent) == "finished", 90, message="the parent to finish")
    children = list(Conversation.objects.filter(parent=parent))
    assert len(workers_of(children)) == 2, workers_of(children)
