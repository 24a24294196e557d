"""Agent and user messages as Markdown, made safe for the page.

Two locks: markdown-it never passes raw HTML through (`html` off: a `<script>` in a message is
text), and its output is cleaned by nh3 (Ammonia) against a short allow-list, so a link to
`javascript:` or an attribute the parser let through still cannot reach the page. Links open
with `rel="noopener noreferrer nofollow"`. Images are not shown (their requests would leave
the page, and the CSP allows only this origin); their alt text stays. Fenced code blocks that
name a language are coloured by Pygments (canvas.highlight): spans with its token classes only.
"""

from __future__ import annotations

from functools import lru_cache

import nh3
from markdown_it import MarkdownIt

from .highlight import TOKEN_CLASSES, highlighted_block

_TAGS = {
    "p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote",
    "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "a",
    "table", "thead", "tbody", "tr", "th", "td", "span",
}  # fmt: skip
_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"align"}, "td": {"align"}}
_CLASSES = {"pre": {"highlight"}, "span": set(TOKEN_CLASSES)}
"""Only Pygments' classes: a message cannot dress its text as the page's own controls."""


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    parser = MarkdownIt(
        "commonmark",
        {"html": False, "linkify": False, "typographer": False,
         "highlight": lambda code, language, _attrs: highlighted_block(language, code)},
    )  # fmt: skip
    parser.enable(["table", "strikethrough"])
    # An image becomes its alt text: no request leaves the page for a model's image.
    parser.add_render_rule("image", lambda self, tokens, idx, options, env: self.renderInline(
        tokens[idx].children or [], options, env))  # fmt: skip
    return parser


def markdown_to_html(text: str) -> str:
    """Sanitised HTML for a message written in Markdown (never raw HTML from the text)."""
    rendered = _parser().render(text)
    return nh3.clean(
        rendered,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        allowed_classes=_CLASSES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


def markdown_inline_to_html(text: str) -> str:
    """One line of Markdown (code spans, emphasis) without a paragraph around it."""
    return nh3.clean(_parser().renderInline(text), tags={"code", "strong", "em"}, attributes={})
