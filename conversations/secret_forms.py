"""The shapes one secret value takes in text, each as a regex fragment.

A command can print a secret plainly or encoded: JSON-escaped, URL-encoded, HTML-escaped (each
escaper's quote entities, non-ASCII as itself or as &#NNN;), inside a Python repr() or ascii()
of the str or of its UTF-8 bytes (\\xe9, \\u20ac, \\U0001f600), hex, base64. The redactor
(redaction.py) joins these fragments into one pattern. Pure: no ORM, no Django.

Base64 at every byte offset. Encoding groups 3 bytes into 4 characters of 6 bits, so a secret
embedded in a longer byte string encodes differently depending on where it starts within a
group (0, 1 or 2 bytes in). For each of the 3 alignments the *core* is the run of characters
whose 6 bits all come from the secret: identical wherever the secret sits. The characters just
outside the core are partial: at the start, the prefix's last bits plus the secret's first 2
or 4 bits; at the end, the secret's last 2 or 4 bits plus the next byte's (or padding). Removing
the core alone leaves at most 4 + 4 bits of the secret behind, which cannot be decoded back, but
the fragment also consumes a partial neighbour when it fits (a character class of the 4 or 16
characters consistent with the secret's bits), so nothing secret-derived stays in the text.
The standard and URL-safe alphabets differ in two characters, so one fragment covers both.
Encoders such as `base64` wrap lines at 76 columns; fragments tolerate a line break between
any two characters (for values up to WRAP_TOLERANT_MAX_BYTES, to keep patterns compact).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote, quote_plus

MIN_ENCODED_CHARS = 4
"""Shorter values are redacted only as themselves. Their encodings are a handful of characters
that ordinary base64 or hex text contains by chance, so matching them would scramble unrelated
output while protecting almost nothing: a value this short is guessable anyway. The plain value
is still replaced everywhere, even at the cost of false positives (a leak is worse)."""

MIN_SHARED_ANCHOR = 6
"""The escaped forms share an anchor, a run of the value they all copy, when it is at least
this long; otherwise each form is its own anchor (a short one would pass almost any text)."""

WRAP_TOLERANT_MAX_BYTES = 4096
"""Above this size base64 fragments match unwrapped text only: a line-break group between every
character would make the pattern for a large key file megabytes long."""

_STD = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_URLSAFE_SWAP = {"+": "-", "/": "_"}
_LINE_BREAK = r"(?:\r?\n)?"
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}|\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})")
_HTML_QUOTES = (
    ('"', "'"),  # html.escape(quote=False), XML text
    ("&quot;", "&#x27;"),  # Python's html.escape, Django
    ("&#34;", "&#39;"),  # MarkupSafe (Jinja2, Flask)
    ("&quot;", "&#39;"),  # older Django, Ruby
    ("&quot;", "&#039;"),  # PHP htmlspecialchars
    ("&quot;", "&apos;"),  # XML, PHP with ENT_HTML5
    ("&quot;", "'"),  # XML attribute quoting (saxutils.quoteattr, ElementTree)
)
"""How escapers write the double and the single quote."""
_ESCAPED_SOMEWHERE = re.compile(r"[^\x20-\x7e]|[\"'&<>\\]")
"""Characters some HTML or Python escaper rewrites: everything else is printable ASCII that
all of them copy."""
_PY_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_ANCHOR_MAP = str.maketrans({"-": "+", "_": "/", "\r": None, "\n": None})


def anchor_text(text: str) -> str:
    """`text` folded the way anchors are: URL-safe base64 digits as standard ones, no line
    breaks, case folded. Each step maps characters one by one, so whenever a form matches in
    some text, its anchor is a substring of the folded text: a cheap, exact pre-check."""
    return text.translate(_ANCHOR_MAP).casefold()


@dataclass(frozen=True, slots=True)
class SecretForm:
    pattern: str
    """Regex source without capturing groups."""
    max_len: int
    """The longest text it can match; a stream holds back this much to see it whole."""
    anchor: str
    """Literal contained in the `anchor_text` of anything the pattern matches."""


def secret_forms(value: str) -> list[SecretForm]:
    """Every form of `value` worth redacting, most specific first, without duplicates."""
    if not value:
        return []
    forms = [SecretForm(re.escape(value), len(value), anchor_text(value))]
    if len(value) < MIN_ENCODED_CHARS:
        return forms
    raw = value.encode("utf-8")
    seen = {value}
    for text in (
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        quote(value, safe=""),
        quote(value),
        quote_plus(value),
        quote_plus(value, safe="/"),
    ):
        if text not in seen:
            seen.add(text)
            forms.append(SecretForm(_escapes_any_case(text), len(text), anchor_text(text)))
    # Up to 20 more forms that differ only where quotes, &, <, >, \ or non-ASCII were; one
    # shared anchor keeps the redactor's pre-check as short as before.
    shared = _verbatim_run(value)
    for text in (*_markup(value), *_python_escapes(value)):
        if text not in seen:
            seen.add(text)
            anchor = anchor_text(shared if len(shared) >= MIN_SHARED_ANCHOR else text)
            forms.append(SecretForm(_escapes_any_case(text), len(text), anchor))
    forms.append(SecretForm(f"(?i:{raw.hex()})", 2 * len(raw), raw.hex()))
    forms.extend(_base64_form(raw, offset) for offset in range(3))
    return forms


def _verbatim_run(value: str) -> str:
    """The longest run of the value that every HTML and Python escaper leaves as it is."""
    return max(_ESCAPED_SOMEWHERE.split(value), key=len)


def _markup(value: str) -> Iterator[str]:
    """The value as HTML or XML escapers write it: & < > always, quotes each escaper its own
    way, non-ASCII as itself or as decimal character references."""
    base = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for double, single in _HTML_QUOTES:
        text = base.replace('"', double).replace("'", single)
        yield text
        yield text.encode("ascii", "xmlcharrefreplace").decode("ascii")


def _python_escapes(value: str) -> Iterator[str]:
    """The value inside a Python repr() or ascii() of a str or of its UTF-8 bytes, with the
    single quote escaped (a repr holding both quotes) or not."""
    raw = value.encode("utf-8")
    for escape_quote in (False, True):
        yield _py_str(value, ascii_only=True, escape_quote=escape_quote)
        yield _py_str(value, ascii_only=False, escape_quote=escape_quote)
        yield "".join(_py_char(chr(b), escape_quote, True) for b in raw)


def _py_str(value: str, *, ascii_only: bool, escape_quote: bool) -> str:
    return "".join(_py_char(c, escape_quote, ascii_only) for c in value)


def _py_char(c: str, escape_quote: bool, ascii_only: bool) -> str:
    """One character as CPython's repr writes it (unicode_repr / bytes_repr)."""
    if c == "\\" or (c == "'" and escape_quote):
        return "\\" + c
    if c in _PY_NAMED:
        return _PY_NAMED[c]
    code = ord(c)
    if code < 0x20 or code == 0x7F or (code > 0x7F and (ascii_only or not c.isprintable())):
        if code <= 0xFF:
            return f"\\x{code:02x}"
        return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
    return c


def _escapes_any_case(text: str) -> str:
    """Literal text whose %XX, \\xXX, \\uXXXX and \\UXXXXXXXX escapes match in either case
    (encoders disagree on it)."""
    out, pos = [], 0
    for match in _ESCAPE.finditer(text):
        out.append(re.escape(text[pos : match.start()]))
        head, digits = match.group()[0], match.group()[1:]
        if head == "\\":
            head, digits = "\\\\" + digits[0], digits[1:]
        out.append(head + "".join(_any_case(c) for c in digits))
        pos = match.end()
    out.append(re.escape(text[pos:]))
    return "".join(out)


def _any_case(c: str) -> str:
    return f"[{c.upper()}{c.lower()}]" if c.isalpha() else c


def _b64_char(index: int) -> str:
    """One base64 digit as a pattern matching it in both alphabets."""
    c = _STD[index]
    return f"[{re.escape(c)}{_URLSAFE_SWAP[c]}]" if c in _URLSAFE_SWAP else c


def _b64_class(indices: set[int]) -> str:
    chars = {_STD[i] for i in indices}
    chars |= {_URLSAFE_SWAP[c] for c in chars if c in _URLSAFE_SWAP}
    return "[" + "".join(re.escape(c) for c in sorted(chars)) + "]"


def _base64_form(raw: bytes, offset: int) -> SecretForm:
    """The fragment for `raw` starting `offset` bytes into a 3-byte group."""
    start_bit, end_bit = 8 * offset, 8 * (offset + len(raw))
    first, last = -(-start_bit // 6), end_bit // 6  # characters [first, last) are all secret
    encoded = base64.b64encode(bytes(offset) + raw).decode("ascii")
    core = [_STD.index(c) for c in encoded[first:last]]
    gap = _LINE_BREAK if len(raw) <= WRAP_TOLERANT_MAX_BYTES else ""
    pattern = gap.join(_b64_char(i) for i in core)
    length = len(core)
    if offset == 1:  # previous character: 2 prefix bits, then the secret's first 4 bits
        pattern = f"(?:{_b64_class({(p << 4) | raw[0] >> 4 for p in range(4)})}{gap})?" + pattern
        length += 1
    elif offset == 2:  # previous character: 4 prefix bits, then the secret's first 2 bits
        pattern = f"(?:{_b64_class({(p << 2) | raw[0] >> 6 for p in range(16)})}{gap})?" + pattern
        length += 1
    tail_bits = end_bit - 6 * last  # 0, 2 or 4 bits of the secret in the next character
    if tail_bits:
        known = (raw[-1] & ((1 << tail_bits) - 1)) << (6 - tail_bits)
        tail = _b64_class({known | q for q in range(1 << (6 - tail_bits))})
        pattern += f"(?:{gap}{tail})?"
        length += 1
    max_len = length + (2 * (length - 1) if gap else 0)
    return SecretForm(pattern, max_len, anchor_text(encoded[first:last]))
