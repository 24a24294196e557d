"""A logging filter that scrubs secret values out of log records.

Peers leaked keys through log lines of whole events and exception messages. The event log is
redacted per team at its door; log records carry no team, so this filter redacts every value
this process has handled (common.secret_values, fed by teams.secrets whenever it decrypts or
receives one). Installed on the console handler in settings.LOGGING.
"""

from __future__ import annotations

import logging
import threading

from common import secret_values
from conversations.redaction import Redactor

_lock = threading.Lock()
_redactor: tuple[int, Redactor] = (0, Redactor({}))


def known_values_redactor() -> Redactor:
    """A redactor over every known value, rebuilt only when a new value was remembered."""
    global _redactor
    generation, redactor = _redactor
    if generation == secret_values.generation():
        return redactor
    with _lock:
        generation, values = secret_values.known()
        _redactor = (generation, Redactor(values))
        return _redactor[1]


class RedactSecretsFilter(logging.Filter):
    """Rewrites the message, the formatted exception and the stack text of each record.

    The message is formatted here (args merged in) because a secret often arrives as an
    argument; the record keeps the redacted text with no args. Never drops a record.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        redactor = known_values_redactor()
        if not redactor:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: let the handler report it as usual
            return True
        redacted = redactor.redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            # Handlers format the traceback only if exc_text is empty; fill it in redacted.
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redactor.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redactor.redact(record.stack_info)
        return True
