"""Quoting untrusted text into a prompt: the one way repository files (AGENTS.md, CLAUDE.md,
agent definitions), skills and webhook payloads enter what a model reads.

`quote_untrusted` wraps text in `<tag attr="value" ...>` ... `</tag>` so that nothing inside
can close the wrapper or open a block that reads as ours: in the text `&`, `<` and `>` become
`&amp;`, `&lt;` and `&gt;` (XML's own escaping, which models read as the characters they
stand for), so `</repository_instructions>` or `<team_instructions>` inside arrives as
`&lt;/repository_instructions&gt;`; attribute values (file names, paths, payload fields) are
escaped the same way plus `"` (`&quot;`), and line breaks become `&#10;` / `&#13;`. The result
holds exactly one opening and one closing tag whatever the text. It is deterministic (a
prompt cache keeps working) and the escaping is the one the secret redactor already knows
(conversations/secret_forms.py, `_markup`), so a secret value inside is still redacted.

`escape_untrusted` is the text's half alone, for a short untrusted line that has no wrapper of
its own (a repository skill's or agent's description in a tool's listing).

Tag and attribute names are ours, never the text's: anything but `[a-z][a-z0-9_-]*` is a
ValueError, a programming error. Pure: the standard library only.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping

_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")


def _name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(f"not a tag or attribute name of ours: {name!r}")
    return name


def _attribute(value: str) -> str:
    # The delimiter is `"`: escaping it is enough; a `'` stays readable ("by the trigger 'x'").
    escaped = html.escape(value, quote=False).replace('"', "&quot;")
    return escaped.replace("\n", "&#10;").replace("\r", "&#13;")


def escape_untrusted(text: str) -> str:
    """`text` with `&`, `<` and `>` escaped: it can open or close no tag."""
    return html.escape(text, quote=False)


def quote_untrusted(
    text: str, *, tag: str, attributes: Mapping[str, str] | None = None, inline: bool = False
) -> str:
    """`text` escaped inside one `<tag ...>` / `</tag>` pair, `attributes` in the order given.
    Block form puts the text on lines of its own; `inline` keeps it within the surrounding
    sentence (and adds no line break, so a template that is itself JSON stays JSON)."""
    pairs = (f'{_name(key)}="{_attribute(value)}"' for key, value in (attributes or {}).items())
    opening = " ".join([_name(tag), *pairs])
    body = escape_untrusted(text)
    if inline:
        return f"<{opening}>{body}</{tag}>"
    return f"<{opening}>\n{body}\n</{tag}>"
