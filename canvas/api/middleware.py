"""Errors made outside the API's routes still answer JSON {error, detail} under /api/.

The routes' own errors are shaped by canvas.api's exception handlers. What this covers is
the rest: the 405 django-ninja answers (as text) for a known path and another method, and the
HTML 500 Django renders when a middleware, or anything else the handlers never saw, raises
(Django has logged it by then). Sits first in MIDDLEWARE so it sees every other layer's
answer; pages outside /api/ keep their HTML.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

API_PREFIX = "/api/"


def _detail(response: HttpResponse) -> str:
    from . import INTERNAL_ERROR_DETAIL

    if response.status_code == 405 and response.has_header("Allow"):
        return f"method not allowed; allowed: {response['Allow']}."
    if response.status_code >= 500:
        return INTERNAL_ERROR_DETAIL
    return f"{response.reason_phrase.lower()}."


def as_json_error(response: HttpResponse) -> JsonResponse:
    """The JSON twin of an error answer: same status and Allow / Retry-After headers, no
    original body (it may be a page, or a trace)."""
    from . import ERROR_CODES

    status = response.status_code
    shaped = JsonResponse(
        {"error": ERROR_CODES.get(status, "error"), "detail": _detail(response)}, status=status
    )
    for header in ("Allow", "Retry-After"):
        if response.has_header(header):
            shaped[header] = response[header]
    return shaped


class ApiJsonErrorsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            response.status_code >= 400
            and request.path.startswith(API_PREFIX)
            and not response.streaming
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            return as_json_error(response)
        return response
