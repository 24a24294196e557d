"""What a locked-out login sees: the login page again, with a 429 that says when to retry.

django-axes calls `lockout_response` (settings AXES_LOCKOUT_CALLABLE) for the login page and
the admin's alike."""

from __future__ import annotations

import math

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

LOGIN_TEMPLATE = "registration/login.html"


def lockout_response(request: HttpRequest, original_response=None, credentials=None):
    seconds = math.ceil(settings.AXES_COOLOFF_TIME.total_seconds())
    minutes = max(1, math.ceil(seconds / 60))
    message = (
        "Too many failed login attempts. Logging in is locked for this account and address; "
        f"try again in {minutes} minute{'s' if minutes != 1 else ''}."
    )
    form = AuthenticationForm(request, initial={"username": (credentials or {}).get("username")})
    context = {"form": form, "lockout": message, "next": request.POST.get("next", "")}
    response: HttpResponse = render(request, LOGIN_TEMPLATE, context, status=429)
    response["Retry-After"] = str(seconds)
    return response
