"""A team's hooks: commands an admin sets to run before or after tool calls, on a new message,
or when an agent wants to finish (orchestration.control.hook_points runs them).

A hook runs arbitrary shell on the workers, so only admins and owners may read or change
hooks, and every change is audited with the command itself. Rules live here, not in the edges:
a name like an identifier, unique per team; an event from HookEvent; a matcher that compiles;
a timeout from 1 to 300 seconds.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max

from common.errors import Conflict, InvalidInput, NotFound

from .audit import audit_record
from .models import HOOK_TIMEOUT_MAX, HOOK_TIMEOUT_MIN, Hook, Team
from .permissions import require_admin
from .vocabulary import HOOK_EVENTS

HOOK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_MATCHER_CHARS = 500
MAX_COMMAND_CHARS = 10_000
DEFAULT_TIMEOUT_SECONDS = 10
FIELDS = ("name", "event", "matcher", "command", "timeout_seconds", "fail_closed", "enabled",
          "position")  # fmt: skip


_require_admin = partial(require_admin, what="manage hooks")


def _flag(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(f"{field} must be true or false.")
    return value


def _whole(value: Any, field: str, low: int, high: int) -> int:
    # bool is an int in Python; `true` as a timeout is a client bug, not one second.
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{field} must be a whole number from {low} to {high}.")
    return value


def _clean_one(key: str, value: Any) -> Any:
    if key == "name":
        if not isinstance(value, str) or not HOOK_NAME.fullmatch(value):
            raise InvalidInput(
                "a hook name is 1-64 letters, digits and _ . -, starting with a letter or digit."
            )
        return value
    if key == "event":
        if value not in HOOK_EVENTS:
            raise InvalidInput(f"event must be one of {', '.join(HOOK_EVENTS)}.")
        return str(value)
    if key == "matcher":
        value = "" if value is None else value
        if not isinstance(value, str) or len(value) > MAX_MATCHER_CHARS:
            raise InvalidInput(f"matcher must be text of at most {MAX_MATCHER_CHARS} characters.")
        try:
            re.compile(value)
        except re.error as exc:
            raise InvalidInput(f"matcher is not a valid regular expression: {exc}.") from None
        return value
    if key == "command":
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput("command must not be empty.")
        if len(value) > MAX_COMMAND_CHARS:
            raise InvalidInput(f"command must be at most {MAX_COMMAND_CHARS} characters.")
        if "\0" in value:  # cannot pass through argv
            raise InvalidInput("command must not contain NUL characters.")
        return value
    if key == "timeout_seconds":
        return _whole(value, key, HOOK_TIMEOUT_MIN, HOOK_TIMEOUT_MAX)
    if key == "position":
        return _whole(value, key, 0, 1_000_000)
    return _flag(value, key)  # fail_closed, enabled


def _clean(fields: dict[str, Any]) -> dict[str, Any]:
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise InvalidInput(f"unknown hook fields: {', '.join(sorted(unknown))}.")
    return {key: _clean_one(key, value) for key, value in fields.items()}


def _describe(hook: Hook) -> dict[str, Any]:
    """What the audit log keeps: everything, the command included, since a hook is code that
    runs on the workers and who set which command is the point of the record."""
    return {key: getattr(hook, key) for key in FIELDS}


def _get(team: Team, hook_id: int) -> Hook:
    hook = Hook.objects.select_for_update().filter(team=team, pk=hook_id).first()
    if hook is None:
        raise NotFound("no such hook.")
    return hook


def hook_list(*, by, team: Team) -> list[Hook]:
    """Every hook of the team in run order. Admins only: commands may reveal internals."""
    _require_admin(by, team)
    return list(Hook.objects.filter(team=team).order_by("position", "id"))


def hook_create(
    *, by, team: Team, name: str, event: str, command: str, matcher: str = "",
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS, fail_closed: bool = False,
    enabled: bool = True, position: int | None = None,
) -> Hook:  # fmt: skip
    """Add a hook; without a position it runs after the team's existing hooks."""
    _require_admin(by, team)
    fields: dict[str, Any] = {
        "name": name, "event": event, "command": command, "matcher": matcher,
        "timeout_seconds": timeout_seconds, "fail_closed": fail_closed, "enabled": enabled,
    }  # fmt: skip
    if position is not None:
        fields["position"] = position
    cleaned = _clean(fields)
    with transaction.atomic():
        if "position" not in cleaned:
            last = Hook.objects.filter(team=team).aggregate(last=Max("position"))["last"]
            cleaned["position"] = 0 if last is None else last + 1
        try:
            with transaction.atomic():
                hook = Hook.objects.create(team=team, **cleaned)
        except IntegrityError:
            raise Conflict(f"a hook named {cleaned['name']!r} already exists.") from None
        audit_record(
            actor=by, kind="hook.created", team=team, target=hook.name, data=_describe(hook)
        )
    return hook


def hook_update(*, by, team: Team, hook_id: int, **fields: Any) -> Hook:
    """Change some fields (FIELDS); a field left out, or None, stays as it is."""
    _require_admin(by, team)
    cleaned = _clean({k: v for k, v in fields.items() if v is not None})
    with transaction.atomic():
        hook = _get(team, hook_id)
        before = _describe(hook)
        for key, value in cleaned.items():
            setattr(hook, key, value)
        try:
            with transaction.atomic():
                hook.save()
        except IntegrityError:
            raise Conflict(f"a hook named {hook.name!r} already exists.") from None
        audit_record(
            actor=by, kind="hook.updated", team=team, target=hook.name,
            data={"before": before, "after": _describe(hook)},
        )  # fmt: skip
    return hook


def hook_delete(*, by, team: Team, hook_id: int) -> None:
    _require_admin(by, team)
    with transaction.atomic():
        hook = _get(team, hook_id)
        data = _describe(hook)
        hook.delete()
        audit_record(actor=by, kind="hook.deleted", team=team, target=data["name"], data=data)


def hook_specs_for_team(team_id: int, event: str | None = None) -> list[dict[str, Any]]:
    """The team's enabled hooks for `event` (every event when None), in run order, as plain
    data (one query). Keys match orchestration.control.hooks.HookSpec: name, event, command, matcher,
    timeout, fail_closed."""
    rows = Hook.objects.filter(team_id=team_id, enabled=True)
    if event is not None:
        rows = rows.filter(event=event)
    return [
        {
            "name": name,
            "event": row_event,
            "command": command,
            "matcher": matcher,
            "timeout": float(timeout),
            "fail_closed": fail_closed,
        }  # fmt: skip
        for name, row_event, command, matcher, timeout, fail_closed in rows.order_by(
            "position", "id"
        ).values_list("name", "event", "command", "matcher", "timeout_seconds", "fail_closed")
    ]
