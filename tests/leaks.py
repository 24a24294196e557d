"""Finding a secret in text however it was written: plain, escaped, encoded."""

from __future__ import annotations

import base64
import binascii
import html
import json
import re
from typing import Any
from urllib.parse import quote, quote_plus

_B64_RUN = re.compile(r"[A-Za-z0-9+/_-]+")


def base64_recoverable(text: str, secret: bytes) -> bool:
    """Whether a run of base64 characters in `text` decodes to bytes containing `secret`, at
    any of the 4 character alignments, in either alphabet, line breaks ignored."""
    for run in _B64_RUN.findall(text.replace("\r", "").replace("\n", "")):
        run = run.replace("-", "+").replace("_", "/")
        for start in range(4):
            body = run[start:]
            if len(body) % 4 == 1:
                body = body[:-1]  # one lone character holds no whole byte
            body += "=" * (-len(body) % 4)
            try:
                if secret in base64.b64decode(body):
                    return True
            except binascii.Error:
                continue
    return False


def leaks(text: str, value: str) -> list[str]:
    """The forms of `value` readable in `text`; empty when none is."""
    json_form = json.dumps(value)[1:-1]
    forms = {
        "plain": value,
        "json": json_form,
        "json-utf8": json.dumps(value, ensure_ascii=False)[1:-1],
        "json-in-json": json.dumps(json_form)[1:-1],
        "quote": quote(value),
        "quote-all": quote(value, safe=""),
        "quote-plus": quote_plus(value),
        "html": html.escape(value),
        "ascii": ascii(value)[1:-1],
        "bytes-repr": repr(value.encode())[2:-1],
    }
    found = [label for label, form in forms.items() if form in text]
    folded = text.casefold()
    found += [label for label, form in forms.items() if "%" in form and form.casefold() in folded]
    if value.encode().hex() in folded:
        found.append("hex")
    if base64_recoverable(text, value.encode()):
        found.append("base64")
    return found


def strings_in(value: Any) -> list[str]:
    """Every string inside a JSON-like value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*strings_in(k), *strings_in(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    return []
