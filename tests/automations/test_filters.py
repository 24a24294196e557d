"""JMESPath filters: truthy runs, with JMESPath's own truthiness."""

import pytest

from automations.filters import FilterError, compile_filter, filter_passes

from .conftest import PULL_REQUEST_OPENED


@pytest.mark.parametrize(
    "expression, passes",
    [
        ("", True),
        ("action == 'opened'", True),
        ("action == 'closed'", False),
        ("pull_request.labels[?name == 'ci']", True),
        ("pull_request.labels[?name == 'docs']", False),
        ("pull_request.missing", False),
        ("number", True),
        ("`0`", True),  # numbers are true in JMESPath
        ('`""`', False),
        ("`{}`", False),
        ("contains(pull_request.labels[].name, 'tests') && action == 'opened'", True),
    ],
)
def test_truthy_means_run(expression, passes):
    assert filter_passes(expression, PULL_REQUEST_OPENED) is passes


@pytest.mark.parametrize("expression", ["action ==", "[?", "foo(bar", "a.`b"])
def test_an_expression_that_does_not_compile_is_a_clear_error(expression):
    with pytest.raises(FilterError, match="not a valid JMESPath expression"):
        compile_filter(expression)


def test_a_type_error_on_a_payload_is_a_filter_error():
    with pytest.raises(FilterError, match="failed on this payload"):
        filter_passes("length(number)", PULL_REQUEST_OPENED)
