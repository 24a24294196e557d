"""kill -9 of the worker in the middle of a workflow: another worker carries the tree to the
end, the script replays against the children's recorded answers, and no finished child runs
twice (each child's command leaves one line in the shared workspace, and no child is spawned
again)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conversations.events import ObservationEvent, RunFinishedEvent, SubagentsSpawnedEvent
from conversations.models import Conversation
from orchestration import services
from tests.conftest import wait_for
from tests.runs import script

from .checks import SIDE_FILE, assert_log_whole, marked_command, status_of

pytestmark = [pytest.mark.faults, pytest.mark.worker]


def child(marker: str, name: str, seconds: float) -> str:
    return script(
        {"tool": "terminal", "args": {"command": marked_command(marker, name, seconds)}},
        {"tool": "finish", "args": {"message": f"answer {name}"}},
    )


def test_kill_9_mid_workflow_finishes_and_repeats_no_finished_child(stack):
    first = stack.start_worker()
    prompts = [child(stack.marker, f"m{i}", 0.2 if i == 0 else 30) for i in range(4)]
    reducer = script({"tool": "finish", "args": {"message": "reduced"}})
    source = (
        f"parts = await wf.map_agents({json.dumps(prompts)})\n"
        f"return await wf.reduce_agent(parts, {json.dumps(reducer)})\n"
    )
    parent = services.conversation_create(
        owner=None, model="scripted",
        prompt=script({"tool": "workflow", "args": {"script": source}},
                      {"tool": "finish", "args": {"message": "tree done"}}),
    )  # fmt: skip
    side = Path(parent.workspace_path) / SIDE_FILE

    def started() -> set[str]:
        return (
            {line.split()[1] for line in side.read_text().splitlines()} if side.exists() else set()
        )

    wait_for(lambda: started() >= {"m0", "m1", "m2", "m3"}, 60, message="all four children")
    m0 = Conversation.objects.get(parent=parent, name__endswith="-1")
    wait_for(lambda: status_of(m0) == "finished", 30, message="the first child to finish")
    first.kill()
    stack.start_worker()
    wait_for(lambda: status_of(parent) == "finished", 90, message="the tree to finish")

    events = assert_log_whole(parent.pk)
    result = next(e for e in events if isinstance(e, ObservationEvent) and e.tool == "workflow")
    assert (result.content, result.is_error) == ("reduced", False)
    rounds = [e for e in events if isinstance(e, SubagentsSpawnedEvent)]
    assert [len(r.children) for r in rounds] == [4, 1]  # the replay spawned no map child again
    assert Conversation.objects.filter(parent=parent).count() == 5
    lines = side.read_text().splitlines()
    for name in ("m0", "m1", "m2", "m3"):
        assert lines.count(f"start {name}") == 1, lines  # nothing ran twice
    finished = [e for e in assert_log_whole(m0.pk) if isinstance(e, RunFinishedEvent)]
    assert len(finished) == 1  # the child that had finished was not run again
    for kid in Conversation.objects.filter(parent=parent):
        assert_log_whole(kid.pk)  # every interrupted command got its result
