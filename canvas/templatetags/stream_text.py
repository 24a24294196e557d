"""Template filters for the stream's text: Markdown messages and ANSI-coloured output.

The only places the stream marks HTML safe; both builders escape or sanitise everything they
are given (canvas.markdown, canvas.ansi).
"""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString, mark_safe

from canvas.ansi import ansi_to_html
from canvas.markdown import markdown_inline_to_html, markdown_to_html

register = template.Library()


@register.filter
def markdown(text: str) -> SafeString:
    return mark_safe(markdown_to_html(str(text)))  # noqa: S308 - sanitised by nh3


@register.filter
def ansi(text: str) -> SafeString:
    return mark_safe(ansi_to_html(str(text)))  # noqa: S308 - every character escaped


@register.filter
def markdown_inline(text: str) -> SafeString:
    return mark_safe(markdown_inline_to_html(str(text)))  # noqa: S308 - sanitised by nh3
