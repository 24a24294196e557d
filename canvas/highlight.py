"""Syntax highlighting for the Files tab and for code blocks in Markdown messages: Pygments on
the server, CSS classes only (the page's Content-Security-Policy allows no inline styles; the
colours are in static/canvas/pygments.css, made by `HtmlFormatter().get_style_defs(".highlight")`)."""

from __future__ import annotations

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_by_name, get_lexer_for_filename
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

_FORMATTER = HtmlFormatter(cssclass="highlight", nowrap=False)
_SPANS = HtmlFormatter(nowrap=True)
TOKEN_CLASSES = frozenset(c for c in STANDARD_TYPES.values() if c)
"""Every class the formatters put on a token's span."""
MAX_HIGHLIGHT_CHARS = 200_000
"""Longer files are shown as plain text: colouring them would hold the request for seconds."""


def highlighted(path: str, text: str) -> SafeString:
    """`text` as HTML with Pygments' token classes, the lexer chosen by the file's name (plain
    text when none fits). Pygments escapes the text itself, so marking it safe is sound."""
    try:
        if len(text) > MAX_HIGHLIGHT_CHARS:
            raise ClassNotFound
        lexer = get_lexer_for_filename(path.rsplit("/", 1)[-1], stripnl=False, ensurenl=False)
    except ClassNotFound:
        lexer = TextLexer(stripnl=False, ensurenl=False)
    return mark_safe(highlight(text, lexer, _FORMATTER))  # noqa: S308 - escaped by Pygments


def highlighted_lines(path: str, lines: list[str]) -> list[SafeString]:
    """Each of `lines` (one side of a diff hunk, without newlines) as HTML with token spans,
    lexed together so a string or comment spanning lines keeps its colour; the lexer is chosen
    by the file's name. Pygments closes its spans at each line's end, so the output splits
    back into lines; plain escaped lines when no lexer fits or the split does not match."""
    text = "\n".join(lines)
    plain = [escape(line) for line in lines]
    if not lines or len(text) > MAX_HIGHLIGHT_CHARS:
        return plain
    try:
        lexer = get_lexer_for_filename(path.rsplit("/", 1)[-1], stripnl=False, ensurenl=False)
    except ClassNotFound:
        return plain
    out = highlight(text, lexer, _SPANS).split("\n")
    if out and out[-1] == "" and len(out) == len(lines) + 1:
        out.pop()  # the newline a lexer adds at the end
    if len(out) != len(lines):
        return plain
    return [mark_safe(line) for line in out]  # noqa: S308 - escaped by Pygments


def highlighted_block(language: str, text: str) -> str:
    """A fenced code block in `language` (a Pygments alias: "python", "sh", ...) as
    `<pre class="highlight"><code>` with token spans; "" when no lexer has that name or the
    block is too long, and the Markdown renderer escapes it as plain code instead. Pygments
    escapes the text."""
    if not language or len(text) > MAX_HIGHLIGHT_CHARS:
        return ""
    try:
        lexer = get_lexer_by_name(language, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return ""
    return f'<pre class="highlight"><code>{highlight(text, lexer, _SPANS)}</code></pre>'
