"""Redaction is pure: every encoding, every byte offset, every split point, no database."""

from __future__ import annotations

import base64
import html
import json
import random
import re
import xml.sax.saxutils
from urllib.parse import quote, quote_plus

import markupsafe
import pytest

from conversations import redaction
from conversations.events import (
    ObservationEvent,
    Status,
    StatusChangeEvent,
    SystemPromptEvent,
    event_from_payload,
    event_to_payload,
)
from conversations.redaction import Redactor, StreamRedactor, redactor_for_team
from conversations.secret_forms import WRAP_TOLERANT_MAX_BYTES, secret_forms
from tests.leaks import base64_recoverable

SECRET = 'tok_9fA2"qu\\ote+sl/ash&eq=é~Z'
"""Characters JSON and URL encoding both change, and one outside ASCII."""
LABEL = "<secret:API_KEY>"


@pytest.fixture
def redactor() -> Redactor:
    return Redactor({"API_KEY": SECRET})


def test_plain_value_is_replaced_with_its_name(redactor: Redactor) -> None:
    assert redactor.redact(f"key={SECRET}; again {SECRET}.") == f"key={LABEL}; again {LABEL}."
    assert redactor.redact("nothing here") == "nothing here"


@pytest.mark.parametrize(
    "encoded",
    [
        json.dumps(SECRET)[1:-1],
        json.dumps(SECRET, ensure_ascii=False)[1:-1],
        quote(SECRET),
        quote(SECRET, safe=""),
        re.sub("%..", lambda m: m.group().lower(), quote(SECRET, safe="")),
        quote_plus(SECRET),
        SECRET.encode().hex(),
        SECRET.encode().hex().upper(),
    ],
    ids=["json", "json-utf8", "quote", "quote-all", "quote-lower", "quote-plus", "hex", "HEX"],
)
def test_text_encodings(redactor: Redactor, encoded: str) -> None:
    assert encoded != SECRET
    assert redactor.redact(f"a {encoded} b") == f"a {LABEL} b"


@pytest.mark.parametrize("prefix", range(6))
@pytest.mark.parametrize("suffix", range(4))
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode, base64.encodebytes])
def test_base64_at_every_offset_cannot_be_decoded_back(prefix, suffix, encode) -> None:
    rng = random.Random(prefix * 10 + suffix)
    secret = bytes(rng.randrange(256) for _ in range(45))  # long enough to wrap at 76 columns
    value = secret.decode("latin-1")
    redactor = Redactor({"BLOB": value})
    before, after = rng.randbytes(prefix), rng.randbytes(suffix)
    encoded = encode(before + value.encode() + after).decode()
    assert base64_recoverable(encoded, value.encode())
    redacted = redactor.redact(f"out: {encoded} end")
    assert "<secret:BLOB>" in redacted
    assert not base64_recoverable(redacted, value.encode())


@pytest.mark.parametrize("prefix", range(3))
@pytest.mark.parametrize("suffix", range(3))
def test_what_is_left_of_base64_depends_on_the_surrounding_bytes_only(prefix, suffix) -> None:
    """The partial characters next to the secret are consumed too, so two different secrets of
    one length leave exactly the same text behind."""
    rng = random.Random(prefix * 3 + suffix)
    before, after = rng.randbytes(prefix), rng.randbytes(suffix)
    leftovers = set()
    for _ in range(8):
        value = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(20))
        encoded = base64.b64encode(before + value.encode() + after).decode()
        leftovers.add(Redactor({"K": value}).redact(encoded))
    assert len(leftovers) == 1, leftovers


def test_large_values_match_unwrapped_base64() -> None:
    value = "k" * (WRAP_TOLERANT_MAX_BYTES + 10)
    redacted = Redactor({"BIG": value}).redact(base64.b64encode(b"xy" + value.encode()).decode())
    assert not base64_recoverable(redacted, value.encode())


def test_short_values_are_redacted_plainly_but_not_encoded() -> None:
    redactor = Redactor({"PIN": "ab1"})
    assert redactor.redact("pin ab1, xab1x") == "pin <secret:PIN>, x<secret:PIN>x"
    assert redactor.redact(base64.b64encode(b"ab1").decode()) == "YWIx"


def test_a_longer_secret_is_replaced_whole_when_it_extends_another() -> None:
    redactor = Redactor({"SHORT": "token", "LONG": "token-and-more"})
    assert redactor.redact("token-and-more token") == "<secret:LONG> <secret:SHORT>"


def test_among_many_values_each_is_found_with_its_encodings_and_only_it() -> None:
    """Only the forms whose anchors appear are tried: every value must still be found, plain or
    encoded, beside its neighbours, and a value that extends another still wins whole."""
    rng = random.Random(7)
    values = {f"K{i}": "".join(rng.choices("abcdefXYZ0123456789", k=14)) for i in range(400)}
    values["K400"] = values["K3"] + "-longer"
    redactor = Redactor(values)
    picked = ["K3", "K400", "K17", "K399"]
    text = " | ".join(
        f"{values[k]} {base64.b64encode(values[k].encode()).decode()} {quote(values[k])}"
        for k in picked
    )
    redacted = redactor.redact(text)
    for k in picked:
        assert values[k] not in redacted
        assert f"<secret:{k}>" in redacted
    assert redacted.startswith("<secret:K3> ") and "| <secret:K400> " in redacted
    assert redactor.redact("none of them here") == "none of them here"


def test_one_value_under_two_names_uses_the_first() -> None:
    assert Redactor([("A", "same-value"), ("B", "same-value")]).redact("same-value") == "<secret:A>"


def test_empty_redactor_is_falsy_and_returns_text_unchanged() -> None:
    redactor = Redactor({})
    assert not redactor and redactor.redact("x") == "x"
    assert Redactor({"EMPTY": ""}).redact("x") == "x"


def test_nested_values(redactor: Redactor) -> None:
    value = {"a": [SECRET, {"b": f"x{SECRET}"}, 3, None], SECRET: True}
    assert redactor.redact_value(value) == {"a": [LABEL, {"b": f"x{LABEL}"}, 3, None], LABEL: True}


def test_events_stay_valid_and_untouched_ones_are_the_same_object(redactor: Redactor) -> None:
    clean = ObservationEvent(tool_call_id="c1", tool="terminal", content="fine")
    assert redactor.redact_event(clean) is clean
    dirty = ObservationEvent(tool_call_id="c1", tool="terminal", content=f"got {SECRET}\n")
    out = redactor.redact_event(dirty)
    assert isinstance(out, ObservationEvent)
    assert out.content == f"got {LABEL}\n" and out.id == dirty.id
    assert out.timestamp == dirty.timestamp
    schema = SystemPromptEvent(content="p", tools=[{"description": f"use {SECRET}"}])
    assert redactor.redact_event(schema).tools == [{"description": f"use {LABEL}"}]


def test_typed_fields_are_never_redacted() -> None:
    """A secret that happens to equal an enum value must not make events invalid."""
    redactor = Redactor({"ODD": "running"})
    event = StatusChangeEvent(status=Status.RUNNING, previous=Status.IDLE, reason="now running")
    out = redactor.redact_event(event)
    assert out.status == Status.RUNNING and out.reason == "now <secret:ODD>"
    assert event_from_payload(out.type, event_to_payload(out)) == out


# -- streams ---------------------------------------------------------------------------------


def stream(redactor: Redactor, chunks: list[str]) -> str:
    s = StreamRedactor(redactor)
    return "".join(s.feed(c) for c in chunks) + s.flush()


@pytest.mark.parametrize(
    "text",
    [
        f"before {SECRET} after",
        f"b64 {base64.b64encode(b'Authorization: ' + SECRET.encode()).decode()} end",
        json.dumps({"k": SECRET}),
        SECRET,
    ],
    ids=["plain", "base64", "json", "alone"],
)
def test_a_secret_split_at_any_point_never_leaves_in_clear(redactor, text) -> None:
    expected = redactor.redact(text)
    assert SECRET not in expected
    for k in range(len(text) + 1):
        assert stream(redactor, [text[:k], text[k:]]) == expected, k


def test_char_by_char_and_random_chunks(redactor: Redactor) -> None:
    text = f"x{SECRET}y{SECRET}{SECRET}z" * 3
    assert stream(redactor, list(text)) == redactor.redact(text)
    rng = random.Random(7)
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, len(text)), 6))
        chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        assert stream(redactor, chunks) == redactor.redact(text)


def test_stream_emits_early_when_no_secret_can_be_pending(redactor: Redactor) -> None:
    s = StreamRedactor(redactor)
    text = "a" * (redactor.max_match * 3)
    assert len(s.feed(text)) == len(text) - (redactor.max_match - 1)
    assert StreamRedactor(Redactor({})).feed("abc") == "abc"


# -- the team secret source ------------------------------------------------------------------


@pytest.fixture
def source():
    calls: list[int] = []
    values: dict[int, dict[str, str]] = {1: {"A": "first-value"}}

    def read(team_id: int) -> dict[str, str]:
        calls.append(team_id)
        return dict(values.get(team_id, {}))

    previous = redaction.register_secret_source(read)
    yield calls, values
    redaction.register_secret_source(previous)


def test_version_zero_never_asks_the_source(source) -> None:
    calls, _ = source
    assert redactor_for_team(1, 0) is None
    assert calls == []


def test_one_read_per_version_and_old_values_stay_redacted(source) -> None:
    calls, values = source
    first = redactor_for_team(1, 1)
    assert first is not None and first.redact("first-value") == "<secret:A>"
    assert redactor_for_team(1, 1) is first and calls == [1]
    values[1] = {"A": "second-value"}
    second = redactor_for_team(1, 2)
    assert calls == [1, 1]
    # A command started before the change may still print the old value.
    assert second.redact("first-value second-value") == "<secret:A> <secret:A>"
    assert redactor_for_team(1, 1) is second  # an older reader never downgrades the cache


def test_a_team_whose_secrets_were_all_deleted_costs_nothing(source) -> None:
    calls, values = source
    values[2] = {}
    assert redactor_for_team(2, 3) is None
    assert redactor_for_team(2, 3) is None
    assert calls == [2]


def test_no_source_means_no_redaction() -> None:
    previous = redaction.register_secret_source(None)
    try:
        assert redactor_for_team(1, 5) is None
    finally:
        redaction.register_secret_source(previous)


# -- HTML entities and Python escapes --------------------------------------------------------

MARKUP = "p\"a&s<s'é€>😀"
"""Quotes, &, <, > and non-ASCII from the Latin-1, BMP and astral planes."""


def _py_bytes(value: str) -> str:
    return repr(value.encode())[2:-1]


@pytest.mark.parametrize(
    "encode",
    [
        html.escape,  # &quot; &#x27; (Django's escape too)
        lambda v: html.escape(v, quote=False),
        lambda v: str(markupsafe.escape(v)),  # &#34; &#39; (Jinja2)
        lambda v: html.escape(v).replace("&#x27;", "&#39;"),
        lambda v: html.escape(v).replace("&#x27;", "&#039;"),  # PHP htmlspecialchars
        lambda v: html.escape(v).replace("&#x27;", "&apos;"),
        lambda v: xml.sax.saxutils.quoteattr(v)[1:-1],
        lambda v: html.escape(v).encode("ascii", "xmlcharrefreplace").decode(),
        lambda v: ascii(v)[1:-1],
        lambda v: repr(v)[1:-1],
        lambda v: ascii(v + "'\"")[1:-4],  # inside a repr that escapes the single quote
        lambda v: v.encode("unicode_escape").decode(),
        lambda v: re.sub(r"\\([xuU])([0-9a-f]+)", lambda m: f"\\{m[1]}{m[2].upper()}", ascii(v)[1:-1]),
        _py_bytes,
        lambda v: repr(v.encode() + b"'\"")[2:-4],
    ],
    ids=[
        "html", "html-noquote", "markupsafe", "html-39", "html-039", "html-apos", "quoteattr",
        "html-charref", "ascii", "repr", "repr-both-quotes", "unicode_escape", "ascii-HEX",
        "bytes", "bytes-both-quotes",
    ],
)  # fmt: skip
def test_markup_and_python_escapes(encode) -> None:
    encoded = encode(MARKUP)
    assert encoded != MARKUP
    redacted = Redactor({"K": MARKUP}).redact(f"<td>{encoded}</td>")
    assert redacted == "<td><secret:K></td>", (encoded, redacted)


@pytest.mark.parametrize(
    "value", ['tok_9fA2"qu\\ote', "tab\there", "bell\x07\x7f", "ünï\u200bcode"]
)
def test_python_escapes_match_what_python_writes(value) -> None:
    redactor = Redactor({"K": value})
    for text in (ascii(value)[1:-1], repr(value)[1:-1], _py_bytes(value)):
        assert redactor.redact(f"[{text}]") == "[<secret:K>]", text


def test_a_value_no_escaper_changes_gets_no_extra_forms() -> None:
    assert len(secret_forms("abcdefgh1234")) == 5  # itself, hex and base64 at 3 offsets
