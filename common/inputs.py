"""Input types for the edges: what the database can hold, refused before a query is built.

Postgres text cannot hold a NUL character (psycopg refuses the whole statement, a DataError
and so a 500), an `integer` column stops at 2**31-1 and `bigint` (and OFFSET) at 2**63-1. The
API schemas declare their fields with these types, so such input is a 400 naming the field
before a service or a query sees it. Every string gets an explicit upper bound.

Django's form CharField already refuses NUL (ProhibitNullCharactersValidator); form integer
fields take INT_MAX / BIGINT_MAX as their max_value.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Annotated, Any

from annotated_types import Interval
from pydantic import AfterValidator, Field, SecretStr, StringConstraints

NUL_MESSAGE = "must not contain NUL characters"
INT_MAX = 2**31 - 1
"""Postgres `integer`: Django's IntegerField and PositiveIntegerField."""
BIGINT_MAX = 2**63 - 1
"""Postgres `bigint`: primary keys, seqs, and the largest OFFSET a query takes."""
MONEY_MAX = 99_999_999
"""The largest amount in USD any cost column or limit holds (DecimalField(12, 4))."""


def refuse_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError(NUL_MESSAGE)
    return value


def Text(max_length: int, *, min_length: int = 0) -> Any:  # noqa: N802 - used as a type
    """A string of `min_length` to `max_length` characters, without NUL."""
    return Annotated[
        str,
        StringConstraints(min_length=min_length, max_length=max_length),
        AfterValidator(refuse_nul),
    ]


def SecretText(max_length: int) -> Any:  # noqa: N802 - used as a type
    """A write-only string (kept out of reprs) of at most `max_length` characters, without NUL."""
    return Annotated[SecretStr, Field(max_length=max_length), AfterValidator(_secret_refuse_nul)]


def _secret_refuse_nul(value: SecretStr) -> SecretStr:
    refuse_nul(value.get_secret_value())
    return value


def Int(*, ge: int = 0, le: int = INT_MAX) -> Any:  # noqa: N802 - used as a type
    """An integer within [ge, le]; the defaults fit an `integer` column."""
    return Annotated[int, Interval(ge=ge, le=le)]


def _finite(value: float) -> float:
    # JSON parsers (Python's included) accept Infinity and NaN; no column can hold them.
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


Id = Int(ge=1, le=BIGINT_MAX)
"""A row id in a path or body."""
Offset = Int(ge=0, le=BIGINT_MAX)
"""A count of rows to skip, or a seq to read after."""
Money = Annotated[float, Interval(ge=0, le=MONEY_MAX), AfterValidator(_finite)]
"""An amount in USD."""
MoneyDecimal = Annotated[Decimal, Interval(ge=0, le=MONEY_MAX), Field(allow_inf_nan=False)]
"""An amount in USD, exactly as written (a JSON number or a numeric string)."""
Key = Text(200)
"""A name or key in a path or query: a conversation id, a username, a secret's name."""


class PathSegment:
    """Django URL converter: one path segment without NUL, for names that reach a query.

    A NUL simply does not match, so such a URL is a 404 like any other unknown page."""

    regex = r"[^/\x00]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value
