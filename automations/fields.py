"""What an automation's fields may hold: one cleaner per field, each raising InvalidInput with
a message a person can act on. Checks that need the team (profiles, policy) take it."""

from __future__ import annotations

import re
from collections.abc import Collection
from decimal import Decimal, InvalidOperation
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter
from pydantic import ValidationError

from common.errors import InvalidInput
from common.inputs import MONEY_MAX
from teams.models import Team
from teams.outbound import outbound_url_check
from teams.policies import policy_for_team
from teams.secrets import NAME_PATTERN as SECRET_NAME
from teams.secrets import secrets_required
from workspaces.spec import WorkspaceSpec

from .filters import MAX_FILTER_CHARS, FilterError, compile_filter
from .templating import TemplateError, parse
from .vocabulary import AUTOMATION_TRIGGERS, Concurrency, Missed, Trigger

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_TEMPLATE_CHARS = 100_000
MAX_SECRETS = 100

FIELDS = (
    "name", "enabled", "trigger", "cron", "timezone", "missed", "prompt_template", "filter",
    "model", "agent", "workspace_spec", "concurrency", "max_cost_usd", "allowed_secrets",
    "callback_url", "deadline_minutes", "limits",
)  # fmt: skip
LIMIT_KEYS = ("confirmation_mode", "risk_threshold", "max_iterations", "tools")
"""What an automation may tighten for its runs (the budget is max_cost_usd)."""
MAX_URL_CHARS = 2000
MAX_DEADLINE_MINUTES = 7 * 24 * 60


def _one_of(value: Any, field: str, vocabulary) -> str:
    allowed = [v.value for v in vocabulary]
    if value not in allowed:
        raise InvalidInput(f"{field} must be one of {', '.join(allowed)}.")
    return str(value)


def _text(value: Any, field: str, limit: int) -> str:
    value = "" if value is None else value
    if not isinstance(value, str) or len(value) > limit or "\0" in value:
        raise InvalidInput(f"{field} must be text of at most {limit} characters, without NUL.")
    return value.strip()


def clean_name(value: Any) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise InvalidInput(
            "an automation name is 1-64 letters, digits and _ . -, starting with a letter or digit."
        )
    return value


def clean_template(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("prompt_template must not be empty.")
    value = _text(value, "prompt_template", MAX_TEMPLATE_CHARS)
    try:
        parse(value)
    except TemplateError as exc:
        raise InvalidInput(str(exc)) from None
    return value


def clean_filter(value: Any) -> str:
    value = _text(value, "filter", MAX_FILTER_CHARS)
    if value:
        try:
            compile_filter(value)
        except FilterError as exc:
            raise InvalidInput(str(exc)) from None
    return value


def clean_timezone(value: Any) -> str:
    value = _text(value, "timezone", 64) or "UTC"
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidInput(
            f"timezone {value!r} is not an IANA time zone (e.g. Europe/Paris)."
        ) from None
    return value


def clean_cron(value: Any) -> str:
    value = _text(value, "cron", 100)
    if value and not croniter.is_valid(value):
        raise InvalidInput(f"cron {value!r} is not a cron expression (e.g. '0 3 * * 1-5').")
    if value:
        try:
            croniter(value).get_next()
        except CroniterBadDateError:  # e.g. 0 0 31 2 *: valid, and no day ever matches
            raise InvalidInput(f"cron {value!r} names no time that ever comes.") from None
    return value


def clean_workspace(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, WorkspaceSpec):
        return value.as_json()
    try:
        return WorkspaceSpec.model_validate(value).as_json()
    except ValidationError as exc:
        reasons = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
        raise InvalidInput(f"workspace: {reasons}") from None


def clean_budget(value: Any) -> Decimal | None:
    """Dollars per run; None or "" (how an edit removes one): no budget of its own."""
    if value is None or value == "":
        return None
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        raise InvalidInput("max_cost_usd must be a number of dollars.") from None
    if isinstance(value, bool) or not amount.is_finite() or not 0 < amount <= MONEY_MAX:
        raise InvalidInput(f"max_cost_usd must be more than 0 and at most {MONEY_MAX}.")
    return amount.quantize(Decimal("0.0001"))


def clean_secrets(value: Any) -> list[str]:
    value = [] if value is None else value
    if not isinstance(value, list | tuple) or len(value) > MAX_SECRETS:
        raise InvalidInput(f"allowed_secrets must be a list of at most {MAX_SECRETS} names.")
    for name in value:
        if not isinstance(name, str) or not SECRET_NAME.fullmatch(name):
            raise InvalidInput("allowed_secrets holds secret names, e.g. API_KEY.")
    return sorted(set(value))


def check_secrets(*, team: Team, names: Collection[str], held: Collection[str] = ()) -> None:
    """Every name the team has a secret by, so an automation never names nothing: InvalidInput
    naming the first unknown one. Names in `held` (what it allowed before this change) are
    kept unchecked: deleting a secret must not make every later edit of the automation fail,
    and a name without a secret gives its runs nothing."""
    wanted = {name: "allowed_secrets" for name in names if name not in held}
    secrets_required(team, wanted)


def clean_callback_url(value: Any) -> str:
    """Empty (no callback), or an http(s) URL outside the networks the site blocks: the
    same guard as the team's notification webhook, checked again at every send."""
    value = _text(value, "callback_url", MAX_URL_CHARS)
    if value:
        outbound_url_check(value, what="the callback URL")
    return value


def clean_deadline(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput("deadline_minutes must be a whole number of minutes.")
    if not 1 <= value <= MAX_DEADLINE_MINUTES:
        raise InvalidInput(f"deadline_minutes must be 1 to {MAX_DEADLINE_MINUTES} (a week).")
    return value


def clean_limits(value: Any) -> dict[str, Any]:
    """Only LIMIT_KEYS, None dropped; whether each is no looser than the team's policy is
    `check_limits`' (it needs the team)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"limits must be an object with some of {', '.join(LIMIT_KEYS)}.")
    unknown = sorted(str(key)[:40] for key in value if key not in LIMIT_KEYS)
    if unknown:
        raise InvalidInput(
            f"limits: unknown {', '.join(unknown)} (known: {', '.join(LIMIT_KEYS)})."
        )
    cleaned = {key: value[key] for key in LIMIT_KEYS if value.get(key) is not None}
    if "tools" in cleaned:
        tools = cleaned["tools"]
        if not isinstance(tools, list | tuple) or not all(isinstance(t, str) for t in tools):
            raise InvalidInput("limits.tools must be a list of tool names.")
        cleaned["tools"] = list(dict.fromkeys(tools))
    return cleaned


def check_limits(*, team: Team, agent: str, limits: dict[str, Any]) -> None:
    """The limits as the team's policy allows them now (a run checks again when it starts)."""
    if not limits:
        return
    if agent:
        raise InvalidInput(
            "limits apply to our own agent; an external agent's requests follow the team "
            "policy's rules for it (acp_auto_allow_kinds)."
        )
    from orchestration.tools.registry import tools_for
    from teams.policies import tighten

    tighten(policy_for_team(team.pk), limits)
    if "tools" in limits:
        try:
            tools_for(limits["tools"])
        except KeyError as exc:
            raise InvalidInput(f"limits.tools: {exc.args[0]}.") from None


def check_agent(*, team: Team, model: str, agent: str, workspace_spec: dict[str, Any]) -> None:
    """The model or ACP profile and the workspace kind as the team's policy allows them now;
    the policy may change later, and conversation_create checks again when a run starts."""
    from orchestration.services import NATIVE_AGENT
    from orchestration.step.profiles import UnknownProfileError, profile_get

    policy = policy_for_team(team.pk)
    if agent:
        from acp_bridge.profiles import UnknownAcpProfileError, acp_profile_get

        try:
            profile = acp_profile_get(agent, team.pk)
        except UnknownAcpProfileError as exc:
            raise InvalidInput(str(exc)) from None
        if not policy.agent_kind_allowed(f"acp:{profile.name}"):
            raise InvalidInput(
                f"the team's policy does not allow the external agent {profile.name!r} "
                f"(allowed_agent_kinds needs acp:{profile.name})."
            )
    else:
        try:
            profile_get(model, team.pk)
        except UnknownProfileError as exc:
            raise InvalidInput(str(exc)) from None
        if not policy.agent_kind_allowed(NATIVE_AGENT):
            raise InvalidInput("the team's policy does not allow native agents.")
    kind = workspace_spec.get("kind", "local")
    if not policy.workspace_kind_allowed(kind):
        raise InvalidInput(f"the team's policy does not allow {kind} workspaces.")


def check_trigger(fields: dict[str, Any]) -> None:
    """A schedule needs its cron expression; a webhook takes none."""
    if fields["trigger"] == Trigger.SCHEDULE and not fields["cron"]:
        raise InvalidInput("a schedule needs cron (e.g. '0 3 * * 1-5').")
    if fields["trigger"] == Trigger.WEBHOOK and fields["cron"]:
        raise InvalidInput("cron is only for trigger 'schedule'.")


def clean_one(key: str, value: Any) -> Any:
    if key == "name":
        return clean_name(value)
    if key == "enabled":
        if not isinstance(value, bool):
            raise InvalidInput("enabled must be true or false.")
        return value
    if key == "trigger":
        return _one_of(value, "trigger", AUTOMATION_TRIGGERS)
    if key == "concurrency":
        return _one_of(value, "concurrency", Concurrency)
    if key == "missed":
        return _one_of(value, "missed", Missed)
    if key == "model":
        return _text(value, "model", 200)
    if key == "agent":
        return _text(value, "agent", 64)
    cleaners = {
        "cron": clean_cron, "timezone": clean_timezone, "prompt_template": clean_template,
        "filter": clean_filter, "workspace_spec": clean_workspace, "max_cost_usd": clean_budget,
        "allowed_secrets": clean_secrets, "callback_url": clean_callback_url,
        "deadline_minutes": clean_deadline, "limits": clean_limits,
    }  # fmt: skip
    if key not in cleaners:
        raise InvalidInput(f"unknown automation field {key}.")
    return cleaners[key](value)
