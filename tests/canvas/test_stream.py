"""The stream's pure parts: Markdown made safe, ANSI colours as classes, long outputs clipped,
tool results folded into their calls' cards, and a run's stops in words."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from canvas.ansi import ansi_to_html, strip_ansi
from canvas.event_rows import event_row, status_label
from canvas.file_edits import DiffLine
from canvas.markdown import markdown_inline_to_html, markdown_to_html
from canvas.stream import calls_in_flight, live_row, stream_rows
from canvas.tool_output import clip_output
from conversations.events import (
    ActionEvent,
    AgentMessageEvent,
    ObservationEvent,
    Status,
    StatusChangeEvent,
)

# ---- Markdown ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        "<script>alert(1)</script>",
        '<img src="x" onerror="alert(1)">',
        "<a href='javascript:alert(1)'>x</a>",
        "[click](javascript:alert(1))",
        "![x](javascript:alert(1))",
        '<div onclick="alert(1)">hi</div>',
        "<iframe src=//evil></iframe>",
        "<style>body{display:none}</style>",
        "[x](data:text/html;base64,PHNjcmlwdD4=)",
    ],
)
def test_markdown_never_passes_raw_html_or_script_urls(payload):
    elements = _elements(markdown_to_html(f"before\n\n{payload}\n\nafter"))
    assert {tag for tag, _ in elements} <= {"p", "a", "code", "em", "strong"}, elements
    for _, attrs in elements:
        assert not any(name.startswith("on") or name == "style" for name, _ in attrs), attrs
        href = dict(attrs).get("href") or ""
        assert not href.lower().startswith(("javascript", "data")), href


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, list]] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, attrs))


def _elements(html: str) -> list[tuple[str, list]]:
    parser = _Collect()
    parser.feed(html)
    return parser.elements


def test_markdown_renders_the_usual_constructs():
    html = markdown_to_html(
        "# Plan\n\n**bold** and `code`\n\n- one\n- two\n\n```py\nprint(1 < 2)\n```\n\n"
        "[docs](https://example.com)\n\n| a | b |\n|---|---|\n| 1 | 2 |"
    )
    assert "<h1>Plan</h1>" in html
    assert "<strong>bold</strong>" in html and "<code>code</code>" in html
    assert "<li>one</li>" in html
    # The fenced block is coloured (tests/canvas/test_final_answer.py), its "<" still escaped.
    assert '<span class="o">&lt;</span>' in html and '<pre class="highlight">' in html
    assert 'href="https://example.com"' in html and 'rel="noopener noreferrer nofollow"' in html
    assert "<table>" in html


def test_markdown_inline_keeps_code_spans_only():
    assert markdown_inline_to_html("ran `sleep 3` <b>x</b>") == (
        "ran <code>sleep 3</code> &lt;b&gt;x&lt;/b&gt;"
    )


# ---- ANSI --------------------------------------------------------------------------------


def test_ansi_colours_become_classes_and_text_is_escaped():
    html = ansi_to_html("\x1b[1;31mFAIL <b>&\x1b[0m ok \x1b[32mpass\x1b[39m plain")
    assert html == (
        '<span class="ansi-fg-1 ansi-bold">FAIL &lt;b&gt;&amp;</span> ok '
        '<span class="ansi-fg-2">pass</span> plain'
    )


def test_ansi_bright_background_and_256_colours():
    assert ansi_to_html("\x1b[94;41mx") == '<span class="ansi-fg-12 ansi-bg-1">x</span>'
    assert ansi_to_html("\x1b[38;5;3my\x1b[38;5;200mz") == (
        '<span class="ansi-fg-3">y</span>z'  # beyond the 16 classes: the text stays, uncoloured
    )
    assert ansi_to_html("\x1b[38;2;10;20;30mrgb\x1b[1mb") == 'rgb<span class="ansi-bold">b</span>'


def test_other_escapes_are_dropped_and_no_style_attribute_is_made():
    text = "\x1b]0;title\x07\x1b[2K\x1b[1Aline\x1b[?25l\x1b(Bend"
    assert ansi_to_html(text) == "lineend"
    assert strip_ansi("\x1b[31mred\x1b[0m") == "red"
    assert "<span style" not in ansi_to_html("\x1b[31m<span style='x'>")


# ---- Long outputs ------------------------------------------------------------------------


def test_short_output_is_whole():
    out = clip_output("a\nb\nc")
    assert (out.head, out.clipped, out.total_lines) == ("a\nb\nc", False, 3)


def test_long_output_keeps_head_and_tail():
    text = "\n".join(str(i) for i in range(1, 5001))
    out = clip_output(text)
    assert out.clipped and out.total_lines == 5000
    assert out.head.splitlines() == [str(i) for i in range(1, 31)]
    assert out.tail.splitlines() == [str(i) for i in range(4981, 5001)]
    assert out.hidden_lines == 4950
    assert len(out.head) + len(out.tail) < 1000


def test_one_enormous_line_is_clipped_by_characters():
    out = clip_output("x" * 1_000_000)
    assert out.clipped and out.hidden_lines == 0
    assert len(out.head) + len(out.tail) <= 8_010


# ---- Cards -------------------------------------------------------------------------------


def _call(n: int, command: str = "ls", **kw) -> ActionEvent:
    args = json.dumps({"command": command})
    return ActionEvent(tool_call_id=f"call_{n}", tool="terminal", arguments=args, **kw)


def _result(n: int, content: str = "ok") -> ObservationEvent:
    return ObservationEvent(tool_call_id=f"call_{n}", tool="terminal", content=content, exit_code=0)


def _rows(*events):
    return [event_row(seq, e) for seq, e in enumerate(events, start=1)]


def test_a_result_is_folded_into_its_calls_card_and_keeps_a_marker():
    rows = stream_rows(_rows(_call(1), _call(2), _result(2, "two"), _result(1, "one")))
    assert [r.kind for r in rows] == ["tool-call", "tool-call", "tool-result", "tool-result"]
    first, second = rows[0], rows[1]
    assert first.result is not None and first.result.event.content == "one"
    assert second.result is not None and second.result.event.content == "two"
    assert rows[2].in_card and rows[3].in_card and rows[3].call_seq == 1
    assert [r.seq for r in rows] == [1, 2, 3, 4]  # every seq still has its row


def test_a_result_without_its_call_stands_alone():
    (row,) = stream_rows(_rows(_result(9)))
    assert not row.in_card and row.result is None


def test_unusual_tool_call_ids_get_safe_keys():
    odd = ActionEvent(tool_call_id='a"b <c>', tool="terminal", arguments="{}")
    key = event_row(1, odd).call_key
    assert key.startswith("h-") and key.replace("-", "").isalnum()
    assert event_row(1, _call(3)).call_key == "c-call_3"


def test_a_pause_says_what_was_running_and_the_late_result_says_where_it_is():
    pause = StatusChangeEvent(status=Status.PAUSED, previous=Status.RUNNING, reason="paused by ana")
    rows = stream_rows(_rows(_call(1, "sleep 3"), pause, _result(1)))
    assert rows[1].note == "Paused by ana while `sleep 3` ran; its result follows."
    assert rows[2].in_card and "`sleep 3`" in rows[2].note
    assert rows[0].result is rows[2]


def test_a_pause_between_steps_says_nothing_more():
    pause = StatusChangeEvent(status=Status.PAUSED, reason="paused by ana")
    rows = stream_rows(_rows(_call(1), _result(1), pause))
    assert rows[2].note == "" and rows[1].note == ""


def test_held_calls_are_not_in_flight():
    held = _call(1, "rm -rf /", requires_confirmation=True)
    assert [r.seq for r in calls_in_flight(_rows(held, _call(2)))] == [2]


def test_live_results_go_into_their_cards():
    row = live_row(event_row(5, _result(1)), late_calls={"c-call_1"})
    assert row.in_card and row.note
    assert live_row(event_row(5, _result(2)), late_calls=set()).note == ""
    message = event_row(6, AgentMessageEvent(text="hi"))
    assert live_row(message, set()) is message


def test_file_edits_show_a_diff_in_the_stream():
    edit = ActionEvent(
        tool_call_id="call_1",
        tool="file_editor",
        arguments=json.dumps(
            {
                "command": "str_replace",
                "path": "app.py",
                "old_str": "a = 1\nb = 2",
                "new_str": "a = 1\nb = 3",
            }
        ),  # fmt: skip
    )
    row = event_row(1, edit)
    assert row.edit is not None and row.edit.path == "app.py"
    assert row.edit.diff == [DiffLine(" ", "a = 1"), DiffLine("-", "b = 2"), DiffLine("+", "b = 3")]
    assert row.arguments == []  # nothing shown twice


def test_statuses_read_in_sentence_case():
    assert status_label("waiting_for_confirmation") == "Waiting for confirmation"
    assert status_label("finished") == "Finished"


def test_a_risky_call_says_why_in_words():
    from django.template.loader import render_to_string

    from orchestration.control.risk import rule_explanation

    call = _call(1, "rm -rf build", risk="HIGH", risk_rules=["rm-rf"])
    html = render_to_string(
        "canvas/conversation_detail.html#event-row",
        {"row": event_row(1, call), "conversation_id": "c"},
    )
    assert "Why it is risky:" in html and rule_explanation("rm-rf") in html
    assert 'data-rule="rm-rf"' in html


def test_an_interrupt_says_what_it_cut_off():
    stop = StatusChangeEvent(status=Status.PAUSED, reason="interrupted by ana")
    rows = stream_rows(_rows(_call(1, "make"), _call(2, "make test"), stop))
    assert rows[2].note == "Interrupted by ana while `make`, `make test` ran; their results follow."
