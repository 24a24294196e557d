"""A body over the upload limit answers in words, not Django's bare "Bad Request (400)".

Django finds the body over DATA_UPLOAD_MAX_MEMORY_SIZE when something first reads the form
(the CSRF check), raises RequestDataTooBig and hands it to handler400. The body is never read,
so the form cannot be shown back with the text in it: an htmx request gets a message added at
the end of the element it targeted (the form), which stays with what was typed; a plain post
gets a page. 413 either way (base.html lets htmx swap it).
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views import defaults

TEMPLATE = "canvas/request_too_large.html"


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if not isinstance(exception, RequestDataTooBig):
        return defaults.bad_request(request, exception)
    context = {"limit": settings.DATA_UPLOAD_MAX_MEMORY_SIZE}
    if request.headers.get("HX-Request") == "true":
        response = render(request, TEMPLATE + "#message", context, status=413)
        response["HX-Reswap"] = "beforeend"
        return response
    return render(request, TEMPLATE, context, status=413)
