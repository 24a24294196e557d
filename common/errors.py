"""Errors services raise; edges map them onto HTTP statuses and messages. Shared by every
app, so it imports nothing of theirs."""

from __future__ import annotations

from collections.abc import Callable

_scrub: Callable[[str], str] | None = None


def register_detail_scrubber(scrub: Callable[[str], str] | None) -> None:
    """Install what redacts secret values from error details as they are read (canvas does
    at startup; None removes it)."""
    global _scrub
    _scrub = scrub


class ServiceError(Exception):
    status = 400
    code = "bad_request"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self._detail = detail

    @property
    def detail(self) -> str:
        """The message for people, redacted when it is read: an edge reads it while it answers
        the request, so the scrubber can redact the secrets of the asking person's teams too,
        which the code raising the error may not know."""
        return _scrub(self._detail) if _scrub is not None else self._detail


class InvalidInput(ServiceError):
    status = 400
    code = "invalid_input"


class NotFound(ServiceError):
    status = 404
    code = "not_found"


class Conflict(ServiceError):
    status = 409
    code = "conflict"


class Forbidden(ServiceError):
    """Visible to the user, but their role does not allow this."""

    status = 403
    code = "forbidden"
