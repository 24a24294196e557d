"""An external (ACP) agent's rows on the conversation page, and its permission requests on
the approval card: what a person sees, and what their click records."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from canvas.event_rows import MAX_DIFF_FILES, event_row, tokens_short
from canvas.file_edits import MAX_DIFF_LINES, DiffLine, unified_diff
from canvas.stream import call_words
from conversations import store
from conversations.events import (
    POLICY_DECIDER,
    AcpCommand,
    AcpPromptEvent,
    AcpSessionEvent,
    AcpStateEvent,
    AcpTurnEvent,
    ActionDecisionEvent,
    ActionEvent,
    AgentThoughtEvent,
    BaseEvent,
    Decision,
    FileDiff,
    ObservationEvent,
    PermissionChoice,
    PlanEvent,
    PlanItem,
    Status,
    StatusChangeEvent,
    Usage,
    UserMessageEvent,
)
from conversations.models import Conversation
from orchestration.control import approvals
from tests.factories import make_conversation

pytestmark = pytest.mark.django_db

AGENT = "claude-code"
OPTIONS = [
    PermissionChoice(option_id="allow-always-7", name="Always allow", kind="allow_always"),
    PermissionChoice(option_id="allow-once-3", name="Allow once", kind="allow_once"),
    PermissionChoice(option_id="reject-once-9", name="Reject", kind="reject_once"),
]


# ---- Pure parts ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "words"),
    [
        (0, "0"),
        (950, "950"),
        (1000, "1k"),
        (1500, "1.5k"),
        (12_345, "12k"),
        (200_000, "200k"),
        (1_000_000, "1M"),
        (1_200_000, "1.2M"),
    ],
)
def test_tokens_short(count: int, words: str) -> None:
    assert tokens_short(count) == words


def test_unified_diff_has_hunks_and_signs_without_file_headers() -> None:
    lines, hidden = unified_diff("a\nb\nc\n", "a\nB\nc\nd\n")
    assert hidden == 0
    assert lines[0].sign == "@" and lines[0].text.startswith("@@ -1,3 +1,4 @@")
    assert lines[1:] == [
        DiffLine(" ", "a"),
        DiffLine("-", "b"),
        DiffLine("+", "B"),
        DiffLine(" ", "c"),
        DiffLine("+", "d"),
    ]


def test_unified_diff_keeps_lines_that_look_like_headers() -> None:
    lines, _ = unified_diff("--- x\n", "+++ y\n")
    assert DiffLine("-", "--- x") in lines and DiffLine("+", "+++ y") in lines


def test_unified_diff_of_a_new_file_adds_every_line() -> None:
    assert unified_diff(None, "one\ntwo\n") == ([DiffLine("+", "one"), DiffLine("+", "two")], 0)


def test_unified_diff_of_no_change_is_empty() -> None:
    assert unified_diff("same\n", "same\n") == ([], 0)


def test_unified_diff_is_cut_at_max_lines() -> None:
    lines, hidden = unified_diff(None, "x\n" * (MAX_DIFF_LINES + 25))
    assert (len(lines), hidden) == (MAX_DIFF_LINES, 25)


# ---- Page rows -------------------------------------------------------------------------------


def acp_conversation(user, *events: BaseEvent, **fields) -> Conversation:
    conversation = make_conversation(user, agent=AGENT, **fields)
    store.append(conversation.pk, list(events))
    return conversation


def page(browser: Client, conversation: Conversation) -> str:
    response = browser.get(reverse("conversation-detail", args=[conversation.pk]))
    assert response.status_code == 200
    return response.content.decode()


def article(html: str, marker: str) -> str:
    """The <article> holding `marker`: its opening tag through its closing one."""
    at = html.index(marker)
    start = html.rindex("<article", 0, at)
    return html[start : html.index("</article>", at) + len("</article>")]


def test_header_names_the_agent_not_a_model(browser, user) -> None:
    html = page(browser, acp_conversation(user, UserMessageEvent(text="hi")))
    assert f"Agent <code>{AGENT}</code>" in html
    assert "Model <code>" not in html


def test_a_thought_is_collapsed_under_thinking(browser, user) -> None:
    thought = AgentThoughtEvent(text="Maybe <b>grep</b> first", message_id="m1")
    row = article(page(browser, acp_conversation(user, thought)), "thought-row")
    assert 'class="event event-message-thought"' in row
    assert re.search(
        r"<details class=\"thought-row\">\s*<summary><span class=\"label\">Thinking", row
    )
    assert '<details class="thought-row" open' not in row
    assert "Maybe &lt;b&gt;grep&lt;/b&gt; first" in row


def test_a_plan_is_a_checklist_with_statuses(browser, user) -> None:
    plan = PlanEvent(
        entries=[
            PlanItem(content="Read the tests", status="completed"),
            PlanItem(content="Fix the bug", status="in_progress", priority="high"),
            PlanItem(content="Run <all> tests"),
        ]
    )
    row = article(page(browser, acp_conversation(user, plan)), 'class="plan"')
    items = re.findall(r'<li class="plan-item plan-(\w+) priority-(\w+)"', row)
    assert items == [("completed", "medium"), ("in_progress", "high"), ("pending", "medium")]
    assert "☑" in row and "◐" in row and "☐" in row
    assert "(completed)" in row and "(in_progress)" in row and "(pending)" in row
    assert "Run &lt;all&gt; tests" in row


@pytest.mark.parametrize(
    ("how", "words"),
    [
        ("new", "started (new session)"),
        ("loaded", "resumed with session/load"),
        ("replayed", "started a new session, told what happened so far"),
    ],
)
def test_a_session_row_says_how_it_started(browser, user, how: str, words: str) -> None:
    session = AcpSessionEvent(
        agent=AGENT, session_id="sess-42", how=how, agent_name="Claude Code",
        agent_version="1.2.3", worker="w-east",
    )  # fmt: skip
    row = article(page(browser, acp_conversation(user, session)), "sess-42")
    assert "Claude Code 1.2.3" in row
    assert words in row
    assert "session <code>sess-42</code> on w-east" in row


def test_a_state_row_shows_mode_commands_and_context(browser, user) -> None:
    state = AcpStateEvent(
        mode="plan",
        commands=[AcpCommand(name="review", description="Review the diff")],
        context_used=12_345,
        context_size=200_000,
    )
    row = article(page(browser, acp_conversation(user, state)), "acp-line")
    assert 'Mode <code class="acp-mode">plan</code>' in row
    assert "1 slash command available" in row
    assert "<code>/review</code> Review the diff" in row
    assert "context 12k/200k" in row


def test_a_state_row_without_a_size_or_use(browser, user) -> None:
    html = page(browser, acp_conversation(user, AcpStateEvent(context_used=950)))
    assert re.search(r'class="acp-context"[^>]*>context 950</span>', html)  # no "/size"
    html = page(browser, acp_conversation(user, AcpStateEvent(mode="ask")))
    assert "acp-context" not in html


def test_a_turn_row_shows_stop_reason_tokens_and_cost(browser, user) -> None:
    turn = AcpTurnEvent(
        stop_reason="end_turn",
        usage=Usage(prompt_tokens=1200, completion_tokens=340, cost_usd=0.0123),
    )
    row = article(page(browser, acp_conversation(user, turn)), "stop-reason")
    assert 'Turn ended: <code class="stop-reason">end_turn</code>' in row
    assert "1200 in · 340 out · $0.0123" in row


def test_acp_prompt_rows_are_hidden_bookkeeping(browser, user) -> None:
    prompt = AcpPromptEvent(message_ids=["m-1"])
    html = page(browser, acp_conversation(user, UserMessageEvent(text="go"), prompt))
    assert re.search(
        r'<article id="event-2" data-seq="2" class="event event-acp-prompt"[^>]* hidden>', html
    )
    assert "m-1" not in html


def edit_call(**fields) -> ActionEvent:
    return ActionEvent(
        tool_call_id="call-7", tool="edit", arguments='{"path": "src/app.py"}',
        title="Edit src/app.py", kind="edit", locations=["src/app.py:12", "README.md"],
        **fields,
    )  # fmt: skip


def test_a_tool_call_reads_by_its_title_kind_and_locations(browser, user) -> None:
    row = article(page(browser, acp_conversation(user, edit_call())), "Tool call")
    assert '<span class="tool-title">Edit src/app.py</span>' in row
    assert '<span class="tag tool-kind kind-edit">edit</span>' in row
    assert re.findall(r'<code class="location">([^<]*)</code>', row) == [
        "src/app.py:12",
        "README.md",
    ]
    assert 'class="tool-name"' not in row


def test_our_own_tool_call_still_shows_the_tool_name(browser, user) -> None:
    call = ActionEvent(tool_call_id="c1", tool="terminal", arguments='{"command": "ls"}')
    row = article(page(browser, acp_conversation(user, call)), "Tool call")
    assert '<code class="tool-name">terminal</code>' in row
    assert "tool-title" not in row and "locations" not in row


def test_a_tool_result_shows_its_file_diffs(browser, user) -> None:
    result = ObservationEvent(
        tool_call_id="call-7", tool="edit", content="edited",
        diffs=[
            FileDiff(path="src/app.py", old_text="a = 1\nb = <2>\n", new_text="a = 1\nb = 3\n"),
            FileDiff(path="notes.md", new_text="# new\n"),
        ],
    )  # fmt: skip
    html = page(browser, acp_conversation(user, edit_call(), result))
    card = article(html, "Tool call")  # the result sits in its call's card
    diffs = re.findall(r'<pre class="diff file-diff" aria-label="Changes to ([^"]+)">', card)
    assert diffs == ["src/app.py", "notes.md"]
    first, second = card.split('<pre class="diff file-diff"')[1:]
    assert "--- src/app.py</span>" in first and "+++ src/app.py</span>" in first
    assert '<span class="diff-line diff-hunk">@@ -1,2 +1,2 @@</span>' in first
    assert re.search(r'diff-del"><span class="diff-sign"[^>]*>-</span>b = &lt;2&gt;</span>', first)
    assert re.search(r'diff-add"><span class="diff-sign"[^>]*>\+</span>b = 3</span>', first)
    assert "--- /dev/null</span>" in second and "+++ notes.md</span>" in second
    assert "diff-more" not in card


def test_a_long_diff_says_how_many_lines_are_not_shown(browser, user) -> None:
    result = ObservationEvent(
        tool_call_id="call-7", tool="edit", content="",
        diffs=[FileDiff(path="gen.py", new_text="x\n" * (MAX_DIFF_LINES + 3))],
    )  # fmt: skip
    card = article(page(browser, acp_conversation(user, edit_call(), result)), "Tool call")
    assert card.count('class="diff-line diff-add"') == MAX_DIFF_LINES
    assert "… 3 more lines (the Changes panel has them all)" in card


def test_a_result_changing_many_files_draws_the_first_and_counts_the_rest(browser, user) -> None:
    files = [FileDiff(path=f"f{i}.txt", new_text="x\n") for i in range(MAX_DIFF_FILES + 2)]
    result = ObservationEvent(tool_call_id="call-7", tool="edit", content="", diffs=files)
    card = article(page(browser, acp_conversation(user, edit_call(), result)), "Tool call")
    assert card.count('<pre class="diff file-diff"') == MAX_DIFF_FILES
    assert "… and 2 more files changed" in card


# ---- Permission requests on the approval card ---------------------------------------------


def held(user, options: list[PermissionChoice] = OPTIONS) -> tuple[Conversation, ActionEvent]:
    """An ACP conversation whose agent waits for an answer, as orchestration.external.
    permissions appends it, with its turn's lease still live."""
    conversation = make_conversation(
        user, agent=AGENT, status=Status.RUNNING, lease_token="turn-lease",
        lease_expires_at=timezone.now() + timedelta(minutes=5),
    )  # fmt: skip
    action = edit_call(requires_confirmation=True, options=options, risk="MEDIUM")
    store.append(
        conversation.pk,
        [
            action,
            StatusChangeEvent(
                status=Status.WAITING_FOR_CONFIRMATION, previous=Status.RUNNING,
                reason=f"the agent asks permission: {action.title}",
            ),
        ],
    )  # fmt: skip
    assert [p.action_id for p in approvals.pending_actions(conversation.pk)] == [action.id]
    return conversation, action


def approve(browser: Client, conversation: Conversation, action: ActionEvent, data: dict):
    path = reverse("action-approve", args=[conversation.pk, action.id])
    return browser.post(path, data, HTTP_HX_REQUEST="true")


def decisions(conversation: Conversation) -> list[ActionDecisionEvent]:
    return [
        s.event for s in store.load(conversation.pk) if isinstance(s.event, ActionDecisionEvent)
    ]


def test_the_card_offers_one_button_per_option_by_id(browser, user) -> None:
    conversation, action = held(user)
    card = article(page(browser, conversation), f'id="approval-{action.id}"')
    assert '<span class="tool-title">Edit src/app.py</span>' in card
    assert "src/app.py:12" in card
    forms = re.findall(
        r'name="option_id" value="([^"]+)">\s*<button type="submit" class="option-button '
        r'option-(\w+) (primary approve|danger reject)"\s*data-option-id="([^"]+)"[^>]*>([^<]+)<',
        card,
    )
    assert forms == [
        ("allow-always-7", "allow_always", "primary approve", "allow-always-7", "Always allow"),
        ("allow-once-3", "allow_once", "primary approve", "allow-once-3", "Allow once"),
        ("reject-once-9", "reject_once", "danger reject", "reject-once-9", "Reject"),
    ]
    assert 'name="reason"' not in card  # the agent's options replace Approve and Reject


@pytest.mark.parametrize(
    ("option_id", "decision"),
    [("allow-once-3", Decision.APPROVED), ("reject-once-9", Decision.REJECTED)],
)
def test_an_option_records_its_id_and_its_kinds_decision(
    browser, user, dispatched, option_id: str, decision: Decision
) -> None:
    conversation, action = held(user)
    response = approve(browser, conversation, action, {"option_id": option_id})
    html = response.content.decode()
    assert response.status_code == 200
    assert html.strip().startswith(f'<article id="approval-{action.id}"')
    assert f"decision-{decision}" in html and f">{decision.capitalize()}</span>" in html
    assert "<strong>alice</strong>" in html
    assert f"option <code>{option_id}</code>" in html
    [recorded] = decisions(conversation)
    assert (recorded.action_id, recorded.decision, recorded.option_id, recorded.by) == (
        action.id, decision, option_id, "alice",
    )  # fmt: skip
    assert approvals.pending_actions(conversation.pk) == []
    assert dispatched == []  # the agent's turn is still live on its worker: no slice


def test_a_rejecting_option_gives_the_call_its_rejected_result(browser, user) -> None:
    conversation, action = held(user)
    approve(browser, conversation, action, {"option_id": "reject-once-9"})
    html = page(browser, conversation)
    assert "rejected by alice" in html
    assert "option <code>reject-once-9</code>" in article(html, "event-action-decision")


def test_an_unknown_option_is_refused_on_the_card_and_records_nothing(browser, user) -> None:
    conversation, action = held(user)
    before = Conversation.objects.get(pk=conversation.pk).last_seq
    response = approve(browser, conversation, action, {"option_id": "allow-9000"})
    html = response.content.decode()
    assert response.status_code == 400
    assert html.strip().startswith(f'<article id="approval-{action.id}"')
    assert 'role="alert"' in html and "the agent offered no option &#x27;allow-9000&#x27;" in html
    assert 'data-option-id="allow-once-3"' in html  # the buttons stay, to pick again
    assert Conversation.objects.get(pk=conversation.pk).last_seq == before
    assert decisions(conversation) == []


def test_an_over_long_option_id_is_refused(browser, user) -> None:
    conversation, action = held(user)
    response = approve(browser, conversation, action, {"option_id": "a" * 501})
    assert response.status_code == 400
    assert "at most 500 characters" in response.content.decode()
    assert decisions(conversation) == []


def test_a_policy_decision_reads_the_team_policy(browser, user) -> None:
    conversation, action = held(user)
    store.append(
        conversation.pk,
        [
            ActionDecisionEvent(
                action_id=action.id, tool_call_id=action.tool_call_id,
                decision=Decision.APPROVED, by=POLICY_DECIDER, option_id="allow-once-3",
                reason="the team policy allows edit calls without asking",
            ),
        ],
    )  # fmt: skip
    row = article(page(browser, conversation), "event-action-decision")
    assert "by <strong>the team policy</strong>" in row
    assert "option <code>allow-once-3</code>" in row


def test_a_pause_note_names_an_external_agents_call_by_its_title():
    titled = event_row(
        3, ActionEvent(tool_call_id="c1", tool="edit", arguments="{}", title="Edit notes")
    )
    assert call_words(titled) == "“Edit notes”"
    plain = event_row(4, ActionEvent(tool_call_id="c2", tool="think", arguments="{}"))
    assert call_words(plain) == "the think call"
