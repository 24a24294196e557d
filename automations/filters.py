"""Delivery filters: a JMESPath expression over the payload; a truthy result means run.

Truthiness is JMESPath's own (false, null, "", [] and {} are false; every number is true),
so an expression means the same here as in any other JMESPath tool. Pure: no ORM.
"""

from __future__ import annotations

from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError

MAX_FILTER_CHARS = 2000


class FilterError(ValueError):
    """A filter that does not compile, or one that failed on a payload."""


def compile_filter(expression: str):
    """The compiled expression; FilterError with the parser's reason when it does not parse."""
    if len(expression) > MAX_FILTER_CHARS:
        raise FilterError(f"the filter must be at most {MAX_FILTER_CHARS} characters.")
    try:
        return jmespath.compile(expression)
    except JMESPathError as exc:
        raise FilterError(f"the filter is not a valid JMESPath expression: {exc}") from None


def _truthy(value: Any) -> bool:
    if value is None or value is False:
        return False
    if isinstance(value, str | list | dict):
        return bool(value)
    return True


def filter_passes(expression: str, payload: Any) -> bool:
    """True when `expression` is empty or evaluates truthy on `payload`."""
    if not expression.strip():
        return True
    try:
        return _truthy(compile_filter(expression).search(payload))
    except JMESPathError as exc:  # a type error met at run time, e.g. a function's argument
        raise FilterError(f"the filter failed on this payload: {exc}") from None
