"""The Terminal tab's console rendered on its own: ANSI colours as the stream shows them
(canvas.ansi), everything from the command escaped."""

from __future__ import annotations

from django.template.loader import render_to_string

from canvas.panels import TEMPLATE, ConsoleEntry


def _console(*entries: ConsoleEntry) -> str:
    return render_to_string(f"{TEMPLATE}#panel-terminal", {"console": list(entries)})


def test_colours_become_spans_and_the_rest_is_escaped():
    html = _console(
        ConsoleEntry(1, "printf '\\033[31mred\\033[0m'", "\x1b[31mred\x1b[0m", 0),
        ConsoleEntry(2, "cat page.html", "\x1b[1;32m<b>ok</b>\x1b[0m & <script>x()</script>\n", 0),
    )
    assert '<span class="ansi-fg-1">red</span>\n' in html  # a newline ends the output
    assert '<span class="ansi-fg-2 ansi-bold">&lt;b&gt;ok&lt;/b&gt;</span>' in html
    assert "&amp; &lt;script&gt;x()&lt;/script&gt;\n" in html
    assert "<script>" not in html and "\x1b" not in html


def test_escapes_without_colour_leave_plain_text():
    html = _console(ConsoleEntry(1, "ls", "\x1b]0;title\x07\x1b[2Ka.txt\n", 0))
    assert "a.txt\n" in html and "ansi-" not in html and "title" not in html


def test_the_exit_code_is_said_once():
    """The terminal tool ends its output with "[exit code: N]" for the model; the console
    drops that line and says a failing exit once, in its own note."""
    from types import SimpleNamespace

    from canvas.panels import console_entries
    from conversations.events import ActionEvent, ObservationEvent

    def stored(seq, event):
        return SimpleNamespace(seq=seq, event=event)

    events = []
    for n, (command, code) in enumerate([("false", 1), ("true", 0)]):
        events += [
            stored(2 * n + 1, ActionEvent(tool_call_id=f"c{n}", tool="terminal",
                                          arguments=f'{{"command": "{command}"}}')),
            stored(2 * n + 2, ObservationEvent(tool_call_id=f"c{n}", tool="terminal",
                                               content=f"out\n[exit code: {code}]",
                                               exit_code=code)),
        ]  # fmt: skip
    entries = console_entries(events)
    assert [e.output for e in entries] == ["out\n", "out\n"]
    html = _console(*entries)
    assert html.count("exit") == 1 and '<span class="console-note">[exit 1]</span>' in html
