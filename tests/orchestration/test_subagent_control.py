"""People acting on a tree of sub-agents: Stop one child (its parent reads it as stopped),
Pause and Resume a whole subtree, Close and Delete a parent with its children; two children
ending at once continue their parent exactly once; budgets are shared and spend rolls up."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
from django.db import close_old_connections

from common.errors import Conflict
from conversations import store
from conversations.events import (
    ObservationEvent,
    Status,
    StatusChangeEvent,
    SubagentsSettledEvent,
)
from conversations.models import Conversation
from orchestration import run_control, services
from orchestration.chain.slices import run_slice
from orchestration.erase import conversation_delete
from orchestration.subagents import settle
from teams.models import Policy
from tests.runs import drive, script

from .test_subagents import events, results, row, say, start

pytestmark = pytest.mark.django_db(transaction=True)

SLOW_CHILD = script({"tool": "think", "args": {"thought": "one"}},
                    {"tool": "finish", "args": {"message": "slow done"}})  # fmt: skip


def run_only(dispatched, conversation_id) -> None:
    """Run the enqueued slices of one conversation, leaving the others' in the queue."""
    for _ in range(50):
        mine = [d for d in dispatched if d[0] == str(conversation_id)]
        if not mine:
            return
        dispatched.remove(mine[0])
        assert run_slice(*mine[0]) is None
    raise AssertionError("the run did not stop")


def spawned(dispatched, owner=None, names=("a", "b")) -> tuple[Conversation, list[Conversation]]:
    tasks = [{"name": n, "prompt": SLOW_CHILD} for n in names]
    parent = services.conversation_create(
        owner=owner, model="scripted",
        prompt=script({"tool": "delegate", "args": {"tasks": tasks}},
                      {"tool": "finish", "args": {"message": "parent done"}}),
    )  # fmt: skip
    run_only(dispatched, parent.pk)
    assert row(parent).status == Status.WAITING_FOR_SUBAGENTS
    return parent, list(Conversation.objects.filter(parent=parent).order_by("name"))


def test_the_parent_waits_holding_no_lease_nor_slice(dispatched):
    parent, children = spawned(dispatched)
    waiting = row(parent)
    assert (waiting.lease_token, waiting.run_slice) == (None, None)
    assert [c.status for c in children] == ["running", "running"]


def test_stopping_one_child_reports_it_stopped_and_the_parent_goes_on(dispatched, user):
    parent, (a, b) = spawned(dispatched)
    run_control.conversation_stop(conversation_id=a.pk, by=user)
    assert row(a).status == Status.PAUSED
    drive(dispatched)
    assert row(b).status == Status.FINISHED
    assert row(parent).status == Status.FINISHED
    result = next(o for o in results(parent) if o.tool == "delegate")
    assert result.is_error
    assert "## a (paused (stopped by alice))" in result.content
    assert "## b (finished)\nslow done" in result.content
    with pytest.raises(Conflict):
        run_control.conversation_stop(conversation_id=a.pk, by=user)


def test_pause_and_resume_act_on_the_whole_subtree(dispatched, user):
    parent, children = spawned(dispatched)
    run_control.conversation_pause(conversation_id=parent.pk, by=user)
    assert row(parent).status == Status.PAUSED
    assert {row(c).status for c in children} == {"paused"}
    drive(dispatched)  # the children's queued slices find them paused and do nothing
    assert not [e for e in events(parent) if isinstance(e, SubagentsSettledEvent)]
    run_control.conversation_run(conversation_id=parent.pk, by=user)
    assert {row(c).status for c in children} == {"running"}
    drive(dispatched)
    assert row(parent).status == Status.FINISHED
    result = next(o for o in results(parent) if o.tool == "delegate")
    assert not result.is_error and "2 of 2 tasks finished." in result.content


def test_stop_on_the_parent_stops_every_child(dispatched, user):
    parent, children = spawned(dispatched)
    run_control.conversation_stop(conversation_id=parent.pk, by=user)
    assert row(parent).status == Status.PAUSED
    assert {row(c).status for c in children} == {"paused"}
    assert all(row(c).interrupt_requested_at is not None for c in children)


def test_close_and_delete_take_the_children_along(dispatched, user):
    parent, children = spawned(dispatched, user)
    with pytest.raises(Conflict):
        conversation_delete(conversation_id=parent.pk, by=user)  # still waiting
    run_control.conversation_close(conversation_id=parent.pk, by=user)
    assert all(row(c).closed_at is not None for c in children)
    assert {row(c).status for c in children} == {"paused"}
    conversation_delete(conversation_id=parent.pk, by=user)
    assert not Conversation.objects.filter(pk__in=[parent.pk, *[c.pk for c in children]]).exists()


def test_deleting_one_stopped_child_settles_its_waiting_parent(dispatched, user):
    parent, (a, b) = spawned(dispatched, user)
    run_only(dispatched, b.pk)
    run_control.conversation_stop(conversation_id=a.pk, by=user)
    drive(dispatched)
    assert row(parent).status == Status.FINISHED
    conversation_delete(conversation_id=a.pk, by=user)
    assert Conversation.objects.filter(pk=parent.pk).exists()


def test_two_children_ending_at_once_continue_the_parent_exactly_once(dispatched):
    parent, (a, b) = spawned(dispatched)
    # Both end without anyone settling yet, as if their workers died right after.
    for child in (a, b):
        Conversation.objects.filter(pk=child.pk).update(status=Status.FINISHED)
    barrier = threading.Barrier(4)
    continued: list[bool] = []

    def settle_now(child_id) -> None:
        close_old_connections()
        try:
            barrier.wait(10)
            continued.append(settle.child_ended(str(child_id)))
        finally:
            close_old_connections()

    threads = [threading.Thread(target=settle_now, args=(c.pk,)) for c in (a, b, a, b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(continued) == [False, False, False, True]
    parent_events = events(parent)
    assert len([e for e in parent_events if isinstance(e, SubagentsSettledEvent)]) == 1
    resumed = [
        e for e in parent_events
        if isinstance(e, StatusChangeEvent) and e.previous == Status.WAITING_FOR_SUBAGENTS
    ]  # fmt: skip
    assert len(resumed) == 1
    assert len([d for d in dispatched if d[0] == str(parent.pk)]) == 1  # one slice sent


def test_the_sweeper_settles_a_parent_whose_childs_end_nobody_noticed(dispatched):
    parent, (a, b) = spawned(dispatched)
    Conversation.objects.filter(pk__in=[a.pk, b.pk]).update(status=Status.ERROR)
    assert settle.waiting_parents_settle() == 1
    assert row(parent).status == Status.RUNNING
    result = next(o for o in results(parent) if o.tool == "delegate")
    assert result.is_error and "0 of 2 tasks finished." in result.content


def test_children_share_the_parents_budget_and_their_spend_rolls_up(dispatched, user, team_id):
    Policy.objects.create(team_id=team_id, max_cost_per_run_usd=Decimal("1.00"))
    parent, (a, b) = spawned(dispatched, user)
    assert [c.agent_config["max_cost_usd"] for c in (a, b)] == [0.5, 0.5]
    for child, cost in ((a, "0.25"), (b, "0.5")):
        Conversation.objects.filter(pk=child.pk).update(status=Status.FINISHED,
                                                        cost_usd=Decimal(cost))  # fmt: skip
    settle.parent_settle(str(parent.pk))
    settled = next(e for e in events(parent) if isinstance(e, SubagentsSettledEvent))
    assert settled.usage is not None and settled.usage.cost_usd == pytest.approx(0.75)
    assert row(parent).cost_usd == Decimal("0.75")


def test_children_that_spend_the_parents_budget_end_its_run(dispatched, user, team_id):
    Policy.objects.create(team_id=team_id, max_cost_per_run_usd=Decimal("0.50"))
    parent, (a, b) = spawned(dispatched, user)
    Conversation.objects.filter(pk__in=[a.pk, b.pk]).update(
        status=Status.FINISHED, cost_usd=Decimal("0.30")
    )
    settle.parent_settle(str(parent.pk))
    drive(dispatched)
    assert row(parent).status == Status.ERROR
    error = next(e for e in events(parent) if e.type == "agent.error")
    assert error.code == "budget_run" and "$0.6000" in error.message


def test_a_depth_limit_lowered_mid_run_refuses_in_words(dispatched, user, team_id):
    grandchild = say("deep")
    child = script({"tool": "task", "args": {"prompt": grandchild}}, {"say": "child done"})
    parent = services.conversation_create(
        owner=user, model="scripted", prompt=script({"tool": "task", "args": {"prompt": child}},
                                                    {"say": "parent done"}),
    )  # fmt: skip
    run_only(dispatched, parent.pk)
    kid = Conversation.objects.get(parent=parent)
    assert "task" in kid.agent_config["tools"]  # depth 1 of 3
    Policy.objects.create(team_id=team_id, max_subagent_depth=1)
    drive(dispatched)
    refused = next(o for o in results(kid) if o.tool == "task")
    assert refused.is_error
    assert "at most 1 deep (team policy) and this one would be at depth 2" in refused.content
    assert row(parent).status == Status.FINISHED


def test_concurrent_children_are_capped(dispatched, team_id):
    Policy.objects.create(team_id=team_id, max_concurrent_children=2)
    tasks = [{"name": n, "prompt": SLOW_CHILD} for n in ("a", "b")]
    parent = start(
        script(
            {"tools": [{"tool": "delegate", "args": {"tasks": tasks}},
                       {"tool": "task", "args": {"prompt": say("third")}}]},
            {"tool": "finish", "args": {"message": "done"}},
        ),
        team=team_id,
    )  # fmt: skip
    drive(dispatched)
    assert row(parent).status == Status.FINISHED
    task = next(o for o in results(parent) if o.tool == "task")
    assert task.is_error and "at most 2 at once" in task.content
    assert Conversation.objects.filter(parent=parent).count() == 2


def test_the_tool_schema_lists_the_types_and_workspace_files_only_narrow(dispatched, tmp_path):
    from pathlib import Path

    parent = start(say("x"))
    folder = Path(parent.workspace_path) / ".agents" / "agents"
    folder.mkdir(parents=True)
    (folder / "reader.md").write_text(
        "---\nname: reader\ndescription: Reads files.\ntools: [file_editor, finish, sudo]\n"
        "---\nOnly read; never write.\n"
    )
    drive(dispatched)
    from orchestration.chain.lease import lease_claim
    from orchestration.step.runner import SliceRunner

    Conversation.objects.filter(pk=parent.pk).update(status=Status.RUNNING, run_slice="s1")
    claim = lease_claim(str(parent.pk), "s1")
    runner = SliceRunner(row(parent), claim.token)
    task = next(s for s in runner.schemas if s["function"]["name"] == "task")
    assert task["function"]["parameters"]["properties"]["subagent_type"]["enum"] == [
        "general", "reader",
    ]  # fmt: skip
    assert "- reader: Reads files." in task["function"]["description"]
    delegate = next(s for s in runner.schemas if s["function"]["name"] == "delegate")
    assert "reader" in str(delegate["function"]["parameters"])
    definition = runner.subagents.catalog.get("reader")
    from orchestration.subagents.spawn import Parent, child_config

    config = child_config(
        Parent(row(parent), runner.config, runner.limits, 0, 0.0), definition, None
    )
    assert config.tools == ("file_editor", "finish")  # sudo is no tool; the rest narrowed
    assert "untrusted repository content" in config.system_prompt
    assert "Only read; never write." in config.system_prompt


def test_a_child_message_does_not_leak_into_the_parent_before_it_settles(dispatched):
    parent, (a, b) = spawned(dispatched)
    run_only(dispatched, a.pk)
    assert row(a).status == Status.FINISHED
    assert row(parent).status == Status.WAITING_FOR_SUBAGENTS  # b still runs
    assert not [o for o in results(parent) if isinstance(o, ObservationEvent)
                and o.tool == "delegate"]  # fmt: skip
    run_only(dispatched, b.pk)
    assert row(parent).status == Status.RUNNING
    assert store.load(parent.pk)[-1].event.type == "status.changed"


def test_settling_reads_a_fixed_number_of_queries_however_many_children(dispatched):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    counts = []
    for names in (("a", "b"), ("a", "b", "c", "d", "e")):
        parent, children = spawned(dispatched, names=names)
        Conversation.objects.filter(parent=parent).update(status=Status.FINISHED)
        with CaptureQueriesContext(connection) as queries:
            assert settle.parent_settle(str(parent.pk))
        counts.append(len(queries))
    assert counts[0] == counts[1], counts
