"""Errors services raise; edges map them onto HTTP statuses and messages. Shared by every
app, so it imports nothing of theirs."""


class ServiceError(Exception):
    status = 400
    code = "bad_request"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


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
