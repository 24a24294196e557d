"""Receiving a webhook delivery: from the raw body and headers to the answer, in order.

1. unknown, disabled or non-webhook automation: 404 (one answer for all three);
2. signature (automations.signatures): 401 naming what is wrong, never echoing a header.
   Each 404 or 401 counts against the sender's address, each 401 against the automation
   too (teams.throttle.FailureCounter): once either has had CANVAS_WEBHOOK_FAILURE_LIMIT
   within CANVAS_WEBHOOK_COOLOFF_SECONDS, further refusals are 429 with Retry-After. Only
   failures are throttled: a correctly signed delivery is never refused by them, whatever
   its address, so a flood of forged ones cannot starve the real sender;
3. per-automation rate limit over signed deliveries: 429 with Retry-After. Counted after the
   signature, so strangers cannot spend an automation's allowance;
4. the body as JSON (finite numbers only: `1e999` or `NaN` cannot be stored): 400;
5. a delivery key seen before (the MAC, automations.signatures): 200 {"status": "duplicate"},
   nothing starts;
6. the filter: falsy, 200 {"status": "ignored"} and an `ignored` run;
7. the template: a missing field is a `failed` run and a 422 naming the path;
8. the run is recorded `accepted` and committed, then automations.runs starts it: 202
   {"run_id", "conversation_id"}, or the service's status when its conversation could not be
   made (the run `failed` with the reason).

The body's size limit is the view's (it must stop reading): read_limited. Recorded headers,
payload and prompt are redacted of the team's secrets, signatures and credentials dropped.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction

from conversations.redaction import redactor_for_team
from teams.crypto import SecretDecryptionError
from teams.throttle import CACHE_DOWN, FailureCounter

from .filters import FilterError, filter_passes
from .models import Automation, AutomationRun
from .runs import run_start
from .services import webhook_secret_of
from .signatures import SignatureError, signature_verify
from .templating import TemplateError, render
from .vocabulary import RunStatus, Trigger

logger = logging.getLogger(__name__)

MAX_DEPTH = 64
"""JSON nesting a payload may have: deeper only exhausts the stack of what walks it."""
_CREDENTIAL_WORDS = ("signature", "authorization", "cookie", "token", "secret", "key", "password")
_MAX_HEADERS = 60
_MAX_HEADER_CHARS = 1000
REDACTED = "[redacted]"


def _failure_limit() -> int:
    return int(settings.CANVAS_WEBHOOK_FAILURE_LIMIT)


def _cooloff() -> float:
    return float(settings.CANVAS_WEBHOOK_COOLOFF_SECONDS)


ADDRESS_FAILURES = FailureCounter("webhook-address", limit=_failure_limit, cooloff=_cooloff)
"""Unknown webhooks and bad signatures per sender address."""
AUTOMATION_FAILURES = FailureCounter("webhook-automation", limit=_failure_limit, cooloff=_cooloff)
"""Bad signatures per automation, whatever their addresses."""


@dataclass(frozen=True, slots=True)
class WebhookAnswer:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


class BodyTooLarge(Exception):
    pass


def max_bytes() -> int:
    return int(settings.CANVAS_WEBHOOK_MAX_BYTES)


def too_large() -> WebhookAnswer:
    return _error(413, "too_large", f"the body must be at most {max_bytes()} bytes.")


def read_limited(stream: IO[bytes], content_length: str | None) -> bytes:
    """The body, read no further than the limit: BodyTooLarge when the declared length or
    what arrives is over it (a missing Content-Length is read up to the limit plus one)."""
    limit = max_bytes()
    try:
        declared = int(content_length or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise BodyTooLarge
    body = stream.read(limit + 1)
    if len(body) > limit:
        raise BodyTooLarge
    return body


def _error(status: int, error: str, detail: str, **extra: Any) -> WebhookAnswer:
    return WebhookAnswer(status, {"error": error, "detail": detail, **extra})


def _throttled(detail: str, retry_after: int) -> WebhookAnswer:
    answer = _error(429, "throttled", detail)
    return WebhookAnswer(answer.status, answer.body, {"Retry-After": str(retry_after)})


def _over_rate(automation_id: int, now: float) -> int | None:
    """Seconds until the next minute when this delivery is over the automation's rate, else
    None. Fixed one-minute windows in the shared cache; a cache that is down lets it pass."""
    limit = int(settings.CANVAS_WEBHOOK_RATE_PER_MINUTE)
    window = int(now // 60)
    key = f"automations:webhook-rate:{automation_id}:{window}"
    try:
        cache.add(key, 0, timeout=120)
        count = cache.incr(key)
    except CACHE_DOWN + (ValueError,):
        return None
    return max(1, (window + 1) * 60 - int(now)) if count > limit else None


def _refused(
    answer: WebhookAnswer, *, client: str | None, automation_id: int | None
) -> WebhookAnswer:
    """`answer` to a delivery refused before its signature held, counted against its address
    and its automation; a 429 with Retry-After instead while either is blocked."""
    counted = [(ADDRESS_FAILURES, client, "from this address")] if client else []
    if automation_id is not None:
        counted.append((AUTOMATION_FAILURES, str(automation_id), "for this webhook"))
    for counter, key, where in counted:
        retry = counter.retry_after(key)
        if retry is not None:
            return _throttled(
                f"too many unsigned or wrongly signed deliveries {where}; try again in {retry} s.",
                retry,
            )
    for counter, key, where in counted:
        if counter.record(key) is not None:
            logger.warning("webhook failures %s (%s): blocked for %s s", where, key, _cooloff())
    return answer


def payload_problem(payload: Any) -> str | None:
    """Why Postgres cannot hold `payload` (NUL, unencodable text, a number that is not
    finite: JSON's `1e999` parses as Infinity) or it nests too deep."""
    stack = [(payload, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"the payload nests deeper than {MAX_DEPTH} levels."
        if isinstance(value, dict):
            stack.extend((k, depth) for k in value)
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
        elif isinstance(value, float) and not math.isfinite(value):
            return "the payload must hold finite numbers only (not NaN, Infinity or 1e999)."
        elif isinstance(value, str):
            if "\0" in value:
                return "the payload must not contain NUL characters."
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return "the payload holds text that is not valid Unicode."
    return None


def _headers_to_record(headers: Mapping[str, str]) -> dict[str, str]:
    kept: dict[str, str] = {}
    for name, value in list(headers.items())[:_MAX_HEADERS]:
        lowered = name.lower()
        credential = any(word in lowered for word in _CREDENTIAL_WORDS)
        text = str(value).replace("\0", "")[:_MAX_HEADER_CHARS]
        kept[name] = REDACTED if credential else text
    return kept


def _record(
    automation: Automation, *, key: str, headers: dict, payload: Any, prompt: str = "",
    status: RunStatus, error: str = "",
) -> AutomationRun | None:  # fmt: skip
    """The run, committed; None when a delivery with this key is already recorded."""
    redactor = redactor_for_team(automation.team_id, automation.team.secrets_version)
    if redactor is not None:
        headers, payload = redactor.redact_value(headers), redactor.redact_value(payload)
        prompt, error = redactor.redact(prompt), redactor.redact(error)
    try:
        with transaction.atomic():
            return AutomationRun.objects.create(
                automation=automation, trigger=Trigger.WEBHOOK, delivery_key=key,
                headers=headers, payload=payload, prompt=prompt, status=status, error=error,
            )  # fmt: skip
    except IntegrityError:
        return None


def _duplicate(automation: Automation, key: str) -> WebhookAnswer:
    run_id = (
        AutomationRun.objects.filter(automation=automation, delivery_key=key)
        .values_list("pk", flat=True)
        .first()
    )
    return WebhookAnswer(200, {"status": "duplicate", "run_id": run_id})


def delivery_receive(
    *, automation_id: int, body: bytes, headers: Mapping[str, str], client: str | None = None,
    now: float | None = None,
) -> WebhookAnswer:  # fmt: skip
    """The answer to one delivery (see the module's docstring for the order of checks);
    `client` is the sender's address (teams.throttle.client_address), None for none."""
    now = time.time() if now is None else now
    automation = (
        Automation.objects.filter(pk=automation_id, enabled=True, trigger=Trigger.WEBHOOK)
        .select_related("team")
        .first()
    )
    if automation is None:
        return _refused(_error(404, "not_found", "no such webhook."), client=client,
                        automation_id=None)  # fmt: skip
    try:
        secret = webhook_secret_of(automation)
    except SecretDecryptionError:
        logger.exception("automation %s: the webhook secret cannot be decrypted", automation.pk)
        return _error(503, "unavailable", "this webhook cannot verify signatures right now.")
    try:
        verified = signature_verify(secret=secret, body=body, headers=headers, now=now)
    except SignatureError as exc:
        return _refused(_error(401, "unauthorized", str(exc)), client=client,
                        automation_id=automation.pk)  # fmt: skip
    retry_after = _over_rate(automation.pk, now)
    if retry_after is not None:
        return _throttled("too many deliveries for this automation; slow down.", retry_after)
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return _error(400, "invalid_input", "the body must be JSON.")
    problem = payload_problem(payload)
    if problem is not None:
        return _error(400, "invalid_input", problem)
    key = verified.delivery_key
    if AutomationRun.objects.filter(automation=automation, delivery_key=key).exists():
        return _duplicate(automation, key)
    recorded = _headers_to_record(headers)
    try:
        passes = filter_passes(automation.filter, payload)
        prompt = render(automation.prompt_template, payload)
    except (FilterError, TemplateError) as exc:
        run = _record(automation, key=key, headers=recorded, payload=payload,
                      status=RunStatus.FAILED, error=str(exc))  # fmt: skip
        if run is None:
            return _duplicate(automation, key)
        return _error(422, "unprocessable", run.error, run_id=run.pk)
    if not passes:
        run = _record(automation, key=key, headers=recorded, payload=payload,
                      status=RunStatus.IGNORED)  # fmt: skip
        if run is None:
            return _duplicate(automation, key)
        return WebhookAnswer(200, {"status": "ignored", "run_id": run.pk})
    run = _record(automation, key=key, headers=recorded, payload=payload, prompt=prompt,
                  status=RunStatus.ACCEPTED)  # fmt: skip
    if run is None:
        return _duplicate(automation, key)
    return _started(run.pk)


def _started(run_id: int) -> WebhookAnswer:
    try:
        outcome = run_start(run_id=run_id)
    except Exception:  # recorded and committed: the sweeper starts it (start_pending_runs)
        logger.exception("automation run %s: starting its conversation failed", run_id)
        return WebhookAnswer(202, {"status": "accepted", "run_id": run_id, "conversation_id": None})
    run = outcome.run
    if outcome.failure is not None:
        failure = outcome.failure
        return _error(failure.status, failure.code, run.error, run_id=run.pk)
    body: dict[str, Any] = {"status": str(run.status), "run_id": run.pk}
    if run.status == RunStatus.SKIPPED:
        return WebhookAnswer(200, body)
    conversation = str(run.conversation_id) if run.conversation_id else None
    return WebhookAnswer(202, {**body, "conversation_id": conversation})
