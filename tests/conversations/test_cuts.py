"""Cut points never split a tool call from its result or a parallel batch: checked against a
brute-force reading of random histories (hypothesis), and for the cut a condenser chooses."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from conversations.cuts import allowed_cuts, choose_cut, head_length
from conversations.events import (
    ActionEvent,
    AgentMessageEvent,
    AnyEvent,
    CondensationEvent,
    ObservationEvent,
    SystemPromptEvent,
    UserMessageEvent,
)
from conversations.view import condense_view

SYSTEM = SystemPromptEvent(content="be useful")
TASK = UserMessageEvent(text="the task")


@st.composite
def views(draw) -> list[AnyEvent]:
    """A View as a run leaves it: messages, batches of 1-3 calls whose results may come in
    any order with people's messages between them, and maybe a last batch still waiting."""
    view: list[AnyEvent] = [SYSTEM, TASK]
    calls = 0
    for step in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["user", "say", "batch", "batch", "batch"]))
        if kind == "user":
            view.append(UserMessageEvent(text="more"))
        elif kind == "say":
            view.append(AgentMessageEvent(text="hi"))
        else:
            size = draw(st.integers(1, 3))
            actions = [
                ActionEvent(
                    tool_call_id=f"c{calls + i}", tool="t", arguments="{}",
                    llm_response_id=f"r{step}", batch_index=i, batch_size=size,
                )
                for i in range(size)
            ]  # fmt: skip
            calls += size
            results: list[AnyEvent] = [
                ObservationEvent(tool_call_id=a.tool_call_id, tool="t", content="ok")
                for a in draw(st.permutations(actions))
            ]
            for _ in range(draw(st.integers(0, 2))):
                results.insert(draw(st.integers(0, len(results))), UserMessageEvent(text="btw"))
            if draw(st.booleans()):
                view.extend([*actions, *results])
            else:  # streamed, as an external agent reports calls: each result before the next
                result_of = {r.tool_call_id: r for r in results if isinstance(r, ObservationEvent)}
                for action in actions:
                    view.extend([action, result_of[action.tool_call_id]])
    if draw(st.booleans()):  # a batch left waiting (held, or cut off by a crash)
        pending = [
            ActionEvent(tool_call_id=f"p{i}", tool="t", arguments="{}", llm_response_id="rp",
                        batch_index=i, batch_size=2)
            for i in range(2)
        ]  # fmt: skip
        view.extend([*pending, ObservationEvent(tool_call_id="p0", tool="t", content="ok")])
    return view


def splits(view: list[AnyEvent], cut: int) -> bool:
    """Brute force: does a cut before view[cut] part a call from its result or a batch?"""
    sides: dict[str, set[bool]] = {}
    for i, event in enumerate(view):
        if isinstance(event, ActionEvent):
            sides.setdefault(f"call:{event.tool_call_id}", set()).add(i < cut)
            sides.setdefault(f"batch:{event.llm_response_id}", set()).add(i < cut)
    for i, event in enumerate(view):
        if isinstance(event, ObservationEvent):
            action = next(a for a in view if getattr(a, "tool_call_id", None) == event.tool_call_id
                          and isinstance(a, ActionEvent))  # fmt: skip
            sides[f"call:{event.tool_call_id}"].add(i < cut)
            sides[f"batch:{action.llm_response_id}"].add(i < cut)
    waiting = {a.tool_call_id for a in view if isinstance(a, ActionEvent)} - {
        o.tool_call_id for o in view if isinstance(o, ObservationEvent)
    }
    if any(
        isinstance(a, ActionEvent) and a.tool_call_id in waiting and i < cut
        for i, a in enumerate(view)
    ):
        return True  # forgetting a waiting call would leave its result without it
    return any(len(s) > 1 for s in sides.values())


@settings(max_examples=300, deadline=None)
@given(views())
def test_a_cut_is_allowed_exactly_where_it_splits_nothing(view) -> None:
    allowed = allowed_cuts(view)
    assert len(allowed) == len(view) + 1
    for cut, ok in enumerate(allowed):
        assert ok == (not splits(view, cut)), cut


@settings(max_examples=300, deadline=None)
@given(views(), st.data())
def test_the_chosen_cut_keeps_the_task_and_whole_pairs_and_batches(view, data) -> None:
    sizes = data.draw(st.lists(st.integers(1, 50), min_size=len(view), max_size=len(view)))
    budget = data.draw(st.integers(0, sum(sizes)))
    cut = choose_cut(view, sizes, budget=budget)
    if cut is None:
        assert not any(allowed_cuts(view)[head_length(view) + 1 :])
        return
    assert cut.end < len(view) or not any(allowed_cuts(view)[cut.start + 1 : -1])
    assert cut.start == head_length(view) == 2 and cut.end > cut.start
    assert not splits(view, cut.start) and not splits(view, cut.end)
    summary = CondensationEvent(
        forgotten_ids=[e.id for e in cut.forgotten], summary="s", offset=cut.start
    )
    condensed = condense_view(view, summary)
    assert condensed[:3] == [SYSTEM, TASK, summary]
    seen: set[str] = set()
    for event in condensed:
        if isinstance(event, ActionEvent):
            seen.add(event.tool_call_id)
        elif isinstance(event, ObservationEvent):
            assert event.tool_call_id in seen  # no result without its call
    for batch in {a.llm_response_id for a in view if isinstance(a, ActionEvent)}:
        members = [e for e in view if getattr(e, "llm_response_id", None) == batch]
        kept = [e for e in members if e in condensed]
        assert kept in ([], members)
    # As little as possible is forgotten: the earliest allowed cut that keeps something and
    # fits; when none fits, the latest unit is kept all the same, unless it is all there is.
    allowed = allowed_cuts(view)
    head = sum(sizes[: cut.start])
    inner = [end for end in range(cut.start + 1, len(view)) if allowed[end]]
    fitting = [end for end in inner if head + sum(sizes[end:]) <= budget]
    assert cut.end == (fitting[0] if fitting else inner[-1] if inner else len(view))


def test_a_second_condensation_cuts_the_view_without_its_old_summary() -> None:
    a = ActionEvent(tool_call_id="c", tool="t", arguments="{}", llm_response_id="r")
    o = ObservationEvent(tool_call_id="c", tool="t", content="ok")
    old = CondensationEvent(forgotten_ids=["x"], summary="before", offset=2)
    view = [SYSTEM, TASK, old, a, o, AgentMessageEvent(text="done")]
    cut = choose_cut(view, [1] * len(view), budget=3)
    assert cut is not None and cut.forgotten == [a, o]
    assert old not in cut.events
