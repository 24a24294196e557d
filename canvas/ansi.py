"""ANSI colours in tool output as HTML: text escaped, SGR colours as spans with classes.

The page's Content-Security-Policy forbids inline styles, so colours are classes
(`ansi-fg-1`, `ansi-bg-4`, `ansi-bold`, ... styled in app.css): the 16 standard colours and
the first 16 of the 256-colour palette; 24-bit and other 256-colour values are dropped (the
text stays). Every other escape sequence (cursor moves, titles, erase) is removed. The
result is the only HTML this module makes: everything from the output is escaped.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, replace

# CSI (ESC [ ... final byte), OSC (ESC ] ... BEL or ESC \), charset choices, two-byte escapes.
_ESCAPE = re.compile(
    r"\x1b(?:\[([0-9;:?]*)([@-~])|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[()*+][0-9A-Za-z]|[@-Z\\-_])"
)


@dataclass(frozen=True, slots=True)
class _Style:
    fg: int | None = None
    bg: int | None = None
    bold: bool = False
    dim: bool = False
    italic: bool = False
    underline: bool = False

    def classes(self) -> str:
        names = [f"ansi-fg-{self.fg}"] if self.fg is not None else []
        names += [f"ansi-bg-{self.bg}"] if self.bg is not None else []
        flags = {"bold": self.bold, "dim": self.dim, "italic": self.italic}
        names += [f"ansi-{name}" for name, on in flags.items() if on]
        names += ["ansi-underline"] if self.underline else []
        return " ".join(names)


_FLAGS = {1: {"bold": True}, 2: {"dim": True}, 3: {"italic": True}, 4: {"underline": True},
          22: {"bold": False, "dim": False}, 23: {"italic": False}, 24: {"underline": False},
          39: {"fg": None}, 49: {"bg": None}}  # fmt: skip


def _palette(codes: list[int], i: int) -> tuple[int | None, int]:
    """An extended colour after 38/48: (its class index or None, how many codes it used)."""
    if i + 1 < len(codes) and codes[i + 1] == 5 and i + 2 < len(codes):
        n = codes[i + 2]
        return (n if 0 <= n < 16 else None), 3
    if i + 1 < len(codes) and codes[i + 1] == 2:
        return None, 5
    return None, 1


def _apply(style: _Style, params: str) -> _Style:
    codes = [int(p) if p.isdigit() else 0 for p in re.split("[;:]", params)] if params else [0]
    i = 0
    while i < len(codes):
        code = codes[i]
        step = 1
        if code == 0:
            style = _Style()
        elif code in _FLAGS:
            style = replace(style, **_FLAGS[code])
        elif 30 <= code <= 37 or 90 <= code <= 97:
            style = replace(style, fg=code - 30 if code < 90 else code - 90 + 8)
        elif 40 <= code <= 47 or 100 <= code <= 107:
            style = replace(style, bg=code - 40 if code < 100 else code - 100 + 8)
        elif code in (38, 48):
            colour, step = _palette(codes, i)
            style = replace(style, **{"fg" if code == 38 else "bg": colour})
        i += step
    return style


def ansi_to_html(text: str) -> str:
    """`text` escaped for HTML, its SGR colours as `<span class="ansi-...">`."""
    out: list[str] = []
    style = _Style()

    def emit(chunk: str) -> None:
        if not chunk:
            return
        classes = style.classes()
        escaped = html.escape(chunk, quote=False)
        out.append(f'<span class="{classes}">{escaped}</span>' if classes else escaped)

    pos = 0
    for match in _ESCAPE.finditer(text):
        emit(text[pos : match.start()])
        pos = match.end()
        if match.group(2) == "m":
            style = _apply(style, match.group(1) or "")
    emit(text[pos:])
    return "".join(out)


def strip_ansi(text: str) -> str:
    """The text without any escape sequence."""
    return _ESCAPE.sub("", text)
