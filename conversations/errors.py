"""Errors services raise; edges map them onto HTTP statuses and messages."""


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
