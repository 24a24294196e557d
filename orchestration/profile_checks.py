"""Testing a team's model profile: one tiny completion, made on a worker, read back by the page.

The web process never imports LiteLLM (tests/test_web_imports.py) and never holds a profile's
API key, so the page only starts a check (`profile_check_start`, which sends a task) and polls
its answer (`profile_check_get`). The worker (`profile_check_run`) reads the key from the team
secret as a run would, makes one call without retries, and leaves a verdict in the cache that
web and workers share (Redis; the embedded mode's worker runs inside the server process). The
verdict is redacted with the team's secrets, so a provider echoing the key cannot put it on a
page, and nothing here logs a request.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from dataclasses import asdict, dataclass, replace
from typing import Literal

from celery import current_app
from django.core.cache import cache
from kombu.exceptions import OperationalError

from common.errors import NotFound
from teams.models import ModelProfile, Team

from .chain.dispatch import SEND_RETRY_POLICY

logger = logging.getLogger(__name__)

PROFILE_CHECK_TASK = "orchestration.profile_check"
PROMPT = "This is a connection test. Reply with the single word: ok"
CALL_TIMEOUT_SECONDS = 30.0
"""The one call's own limit (a profile's timeout may be minutes)."""
ANSWER_WITHIN_SECONDS = 90.0
"""A check still pending this long has lost its task (no worker, or one that died)."""
KEEP_SECONDS = 600
MAX_SHOWN_CHARS = 300

State = Literal["pending", "ok", "failed"]


@dataclass(frozen=True, slots=True)
class ProfileCheck:
    profile: str
    state: State
    message: str = ""
    """For people: what the model said, or why the call failed in a plain sentence; redacted."""
    detail: str = ""
    """A failure's own words (LiteLLM's class, HTTP status and message), for a details line;
    redacted."""
    seconds: float | None = None
    """How long the call took, when it was made."""
    started_at: float = 0.0


def _key(team_id: int, check_id: str) -> str:
    # The team is part of the key: another team's page cannot read a check by guessing its id.
    return f"profile-check:{team_id}:{check_id}"


def _save(team_id: int, check_id: str, check: ProfileCheck) -> None:
    # A plain dict in the cache: web and workers may run different versions of this class.
    cache.set(_key(team_id, check_id), asdict(check), KEEP_SECONDS)


def _load(team_id: int, check_id: str) -> ProfileCheck | None:
    data = cache.get(_key(team_id, check_id))
    try:
        return ProfileCheck(**data) if isinstance(data, dict) else None
    except TypeError:  # saved by another version
        return None


def profile_check_start(*, team: Team, name: str) -> str:
    """Send a check of the team's profile `name` to any worker; returns the check's id. The
    caller has checked that the user administers the team (a check spends a little money and
    uses the team's key). NotFound when the team has no such profile."""
    if not ModelProfile.objects.filter(team=team, name=name).exists():
        raise NotFound(f"no model profile named {name!r}.")
    check_id = uuid.uuid4().hex
    _save(team.pk, check_id, ProfileCheck(profile=name, state="pending", started_at=time.time()))
    try:
        current_app.send_task(
            PROFILE_CHECK_TASK, kwargs={"team_id": team.pk, "name": name, "check_id": check_id},
            retry=True, retry_policy=SEND_RETRY_POLICY,
        )  # fmt: skip
    except OperationalError as exc:
        logger.warning("profile check %s not sent: %s", check_id, exc)
        _save(team.pk, check_id, ProfileCheck(
            profile=name, state="failed", started_at=time.time(),
            message="The workers' queue cannot be reached; try again in a moment.",
        ))  # fmt: skip
    return check_id


def profile_check_get(*, team: Team, check_id: str) -> ProfileCheck | None:
    """The check as it stands; None when it is unknown or expired. A check nobody answered
    within ANSWER_WITHIN_SECONDS is reported as failed."""
    check = _load(team.pk, check_id)
    if check is None:
        return None
    if check.state == "pending" and time.time() - check.started_at > ANSWER_WITHIN_SECONDS:
        return replace(
            check, state="failed",
            message=f"No worker answered within {ANSWER_WITHIN_SECONDS:.0f} seconds. Are the "
            "workers running?",
        )  # fmt: skip
    return check


_STATUS = re.compile(r"_(\d{3})$")
_PLAIN_BY_STATUS = {
    400: "The provider refused the request as invalid: check the profile's model name.",
    401: "The provider refused the API key.",
    403: "The provider refused this API key access to the model.",
    404: "The provider does not know this model, or the API base has no such endpoint.",
    408: "The model's server did not answer in time.",
    429: "The provider is limiting this key's requests (rate limit or quota); try again later.",
}
_PLAIN_BY_NAME = {
    "Timeout": _PLAIN_BY_STATUS[408],
    "APIConnectionError": "The model's server could not be reached: check the API base.",
    "ContentPolicyViolationError": "The provider refused the test prompt by its content policy.",
}
_SERVER_FAULT = "The model's server failed to answer (an error on its side, HTTP {status})."


def plain_failure(code: str, message: str, *, from_litellm: bool) -> str:
    """A sentence for people from an LLMError's code (`llm_<LiteLLM class>[_<HTTP status>]`,
    orchestration.step.llm) and message. Errors of our own (no key, a refused API base) already
    say it in words: only one raised from a LiteLLM exception (`from_litellm`) is translated."""
    from .step.llm import BAD_RESPONSE

    if not from_litellm:
        return message
    if code == BAD_RESPONSE:
        return (
            "The server answered, but not with a chat completion: is the API base an "
            "OpenAI-compatible endpoint?"
        )
    match = _STATUS.search(code)
    status = int(match.group(1)) if match else None
    name = code.removeprefix("llm_").removesuffix(match.group(0) if match else "")
    if name in _PLAIN_BY_NAME:
        return _PLAIN_BY_NAME[name]
    if status in _PLAIN_BY_STATUS:
        return _PLAIN_BY_STATUS[status]
    if status is not None and status >= 500:
        return _SERVER_FAULT.format(status=status)
    return "The call to the model failed."


def profile_check_run(*, team_id: int, name: str, check_id: str) -> ProfileCheck:
    """On a worker: one completion through the profile, its verdict saved for the page."""
    from .control.outgoing import redact_for_team
    from .step.llm import LiteLLMClient, LLMError
    from .step.profiles import UnknownProfileError, profile_get, profile_with_api_key

    started = time.monotonic()
    seconds: float | None = None
    detail = ""
    try:
        profile = profile_get(name, team_id)
        if profile.team_id != team_id:  # deleted since the check started
            raise UnknownProfileError(f"The team has no model profile named {name!r} any more.")
        profile = profile_with_api_key(profile)
        client = LiteLLMClient(
            replace(profile, num_retries=0, timeout=min(profile.timeout, CALL_TIMEOUT_SECONDS))
        )
        answer = client.complete([{"role": "user", "content": PROMPT}], [])
    except UnknownProfileError as exc:  # the profile, or the secret holding its key, is gone
        state, message = "failed", str(exc)
    except LLMError as exc:
        seconds = time.monotonic() - started
        state, message = (
            "failed",
            plain_failure(exc.code, exc.message, from_litellm=exc.__cause__ is not None),
        )
        detail = exc.message if message != exc.message else ""
        if not profile.api_key_secret and "auth" in exc.code.lower():
            message += " (This profile names no API key secret.)"
    else:
        seconds = time.monotonic() - started
        said = (answer.content or "").strip() or "(an empty message)"
        state, message = "ok", said
    message = redact_for_team(team_id, message)[:MAX_SHOWN_CHARS]
    detail = redact_for_team(team_id, detail)[:MAX_SHOWN_CHARS]
    previous = _load(team_id, check_id)
    started_at = previous.started_at if previous is not None else time.time()
    check = ProfileCheck(
        profile=name, state=state, message=message, detail=detail, seconds=seconds,
        started_at=started_at,
    )  # fmt: skip
    _save(team_id, check_id, check)
    return check
