"""The logging filter scrubs every secret value this process has handled from log records."""

from __future__ import annotations

import logging

import pytest

from canvas.logging import RedactSecretsFilter
from common import secret_values

VALUE = "log-filter-value-7f3a9c"
LABEL = "<secret:LOGGED_KEY>"


@pytest.fixture
def logs(caplog) -> pytest.LogCaptureFixture:
    secret_values.remember({"LOGGED_KEY": VALUE})
    caplog.handler.addFilter(RedactSecretsFilter())
    caplog.set_level(logging.INFO)
    return caplog


def test_message_and_arguments(logs) -> None:
    logger = logging.getLogger("tests.logs")
    logger.info(f"plain {VALUE} in an f-string")
    logger.info("as an argument: %s and %r", VALUE, {"k": VALUE})
    logger.warning("no secret here: %d", 42)
    assert [r.getMessage() for r in logs.records] == [
        f"plain {LABEL} in an f-string",
        f"as an argument: {LABEL} and {{'k': '{LABEL}'}}",
        "no secret here: 42",
    ]
    assert VALUE not in logs.text


def test_exception_text_and_stack(logs) -> None:
    logger = logging.getLogger("tests.logs")
    try:
        raise RuntimeError(f"request failed with header Authorization: {VALUE}")
    except RuntimeError:
        logger.exception("boom")
    logger.info("where", stack_info=True)
    assert "Authorization: " + LABEL in logs.text
    assert VALUE not in logs.text


def test_values_remembered_later_are_picked_up(logs) -> None:
    secret_values.remember({"LATE": "late-value-0042"})
    logging.getLogger("tests.logs").info("late-value-0042")
    assert logs.records[-1].getMessage() == "<secret:LATE>"


def test_values_that_share_a_name_are_all_redacted(logs) -> None:
    """Every team's webhook secret has the same label; a changed secret keeps its name."""
    secret_values.remember({"SHARED_NAME": "first-team-value-1111"})
    secret_values.remember({"SHARED_NAME": "second-team-value-2222"})
    logging.getLogger("tests.logs").info("first-team-value-1111 second-team-value-2222")
    assert logs.records[-1].getMessage() == "<secret:SHARED_NAME> <secret:SHARED_NAME>"


def test_the_console_handler_has_the_filter() -> None:
    from django.conf import settings

    console = settings.LOGGING["handlers"]["console"]
    assert "redact_secrets" in console["filters"]
    root_handlers = logging.getLogger().handlers
    assert any(isinstance(f, RedactSecretsFilter) for h in root_handlers for f in h.filters), (
        root_handlers
    )
