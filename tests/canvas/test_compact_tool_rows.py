"""Tool rows are compact: an output longer than a few lines is marked to fold, with a
"Show more" button (opened by tool-rows.js); short outputs are shown whole, as before."""

from __future__ import annotations

from django.template.loader import render_to_string

from canvas.event_rows import event_row
from canvas.tool_output import COMPACT_LINES, clip_output
from conversations.events import ObservationEvent


def _result_html(content: str) -> str:
    result = ObservationEvent(tool_call_id="call_1", tool="terminal", content=content, exit_code=0)
    return render_to_string(
        "canvas/conversation_detail.html#event-row",
        {"row": event_row(7, result), "conversation_id": "c"},
    )


def test_a_long_output_folds_behind_show_more():
    html = _result_html("\n".join(f"line {i}" for i in range(COMPACT_LINES + 1)))
    assert 'class="output-box is-long" id="output-7"' in html
    assert 'aria-controls="output-7" hidden>Show more</button>' in html
    assert "line 6" in html  # folded, not cut: the whole text is in the page


def test_a_short_output_is_shown_whole():
    html = _result_html("\n".join(f"line {i}" for i in range(COMPACT_LINES)))
    assert 'class="output-box" id="output-7"' in html and "Show more" not in html


def test_compact_counts_lines_of_the_whole_output():
    assert not clip_output("a\nb").compact
    assert clip_output("\n".join(map(str, range(5000)))).compact  # clipped ones too
