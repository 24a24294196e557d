"""Delivery filters: a JMESPath expression over the payload; a truthy result means run.

Truthiness is JMESPath's own (false, null, "", [] and {} are false; every number is true),
so an expression means the same here as in any other JMESPath tool. Pure: no ORM.

Bounded: at most MAX_FILTER_CHARS characters, MAX_FILTER_NODES nodes and MAX_FILTER_DEPTH
levels of nesting (literals' own nesting included). JMESPath parses and evaluates by
recursion, so a deeper expression could exhaust the stack; one is refused with FilterError
when saved, and a filter stored before these bounds fails its run the same way, never with
a crash.
"""

from __future__ import annotations

from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError
from jmespath.parser import ParsedResult

MAX_FILTER_CHARS = 2000
MAX_FILTER_DEPTH = 64
MAX_FILTER_NODES = 500


class FilterError(ValueError):
    """A filter that does not compile, or one that failed on a payload."""


def _shape(tree: dict[str, Any]) -> tuple[int, int]:
    """(nodes, deepest level) of a parsed expression and its literals' contents, walked
    without recursion; stops early once over a bound."""
    nodes, deepest, stack = 0, 0, [(tree, 1, True)]
    while stack and deepest <= MAX_FILTER_DEPTH and nodes <= MAX_FILTER_NODES:
        item, depth, is_node = stack.pop()
        nodes, deepest = nodes + 1, max(deepest, depth)
        if is_node:  # {"type", "children", "value"}; a literal's value is JSON data
            stack.extend((child, depth + 1, True) for child in item["children"])
            if item["type"] == "literal":
                stack.append((item["value"], depth + 1, False))
        elif isinstance(item, dict | list):
            values = item.values() if isinstance(item, dict) else item
            stack.extend((value, depth + 1, False) for value in values)
    return nodes, deepest


def compile_filter(expression: str) -> ParsedResult:
    """The compiled expression; FilterError with the reason when it does not parse or is
    over a bound (see the module's docstring)."""
    if len(expression) > MAX_FILTER_CHARS:
        raise FilterError(f"the filter must be at most {MAX_FILTER_CHARS} characters.")
    try:
        compiled = jmespath.compile(expression)
    except JMESPathError as exc:
        raise FilterError(f"the filter is not a valid JMESPath expression: {exc}") from None
    except RecursionError:
        compiled = None
    nodes, depth = _shape(compiled.parsed) if compiled is not None else (0, MAX_FILTER_DEPTH + 1)
    if depth > MAX_FILTER_DEPTH:
        raise FilterError(f"the filter nests deeper than {MAX_FILTER_DEPTH} levels.")
    if nodes > MAX_FILTER_NODES:
        raise FilterError(f"the filter has more than {MAX_FILTER_NODES} parts.")
    return compiled


def _truthy(value: Any) -> bool:
    if value is None or value is False:
        return False
    if isinstance(value, str | list | dict):
        return bool(value)
    return True


def filter_passes(expression: str, payload: Any) -> bool:
    """True when `expression` is empty or evaluates truthy on `payload`; FilterError when it
    does not compile, is over a bound, or fails on this payload."""
    if not expression.strip():
        return True
    compiled = compile_filter(expression)
    try:
        return _truthy(compiled.search(payload))
    except JMESPathError as exc:  # a type error met at run time, e.g. a function's argument
        raise FilterError(f"the filter failed on this payload: {exc}") from None
    except RecursionError:  # bounded above; kept so that evaluation can never crash a request
        raise FilterError("the filter nests too deep to evaluate on this payload.") from None
