"""The webhook endpoint: read the body within its limit, hand it to automations.webhooks."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from teams.throttle import client_address

from .webhooks import BodyTooLarge, delivery_receive, read_limited, too_large


def _json(answer) -> JsonResponse:
    response = JsonResponse(answer.body, status=answer.status)
    for name, value in answer.headers.items():
        response[name] = value
    return response


@csrf_exempt  # signed by the sender's HMAC instead; no session is involved
@require_POST
def webhook_receive(request: HttpRequest, automation_id: int) -> JsonResponse:
    try:
        body = read_limited(request, request.META.get("CONTENT_LENGTH"))
    except BodyTooLarge:
        return _json(too_large())
    answer = delivery_receive(
        automation_id=automation_id, body=body, headers=request.headers,
        client=client_address(request),
    )  # fmt: skip
    return _json(answer)
