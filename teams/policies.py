"""Team policies: what a team's agents may do and spend.

Two rows can apply to a team: the site default (the Policy row without a team) and the team's
own. The effective policy takes the stricter value of every field, so a team admin can only
tighten what the site allows. A conversation may then tighten its team's policy, never loosen
it (`tighten`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from dataclasses import field as dataclass_field
from dataclasses import fields as dataclass_fields
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from common.errors import Forbidden, InvalidInput
from workspaces.spec import IMAGE_NAME, KINDS

from .audit import audit_record
from .models import Policy, Team
from .permissions import Action, role_allows, team_role
from .vocabulary import ConfirmationMode, NetworkAccess, Risk, RiskLevel

# Higher is stricter. A lower risk threshold asks for confirmation of more actions.
CONFIRMATION_RANK = {
    ConfirmationMode.NEVER: 0,
    ConfirmationMode.RISKY: 1,
    ConfirmationMode.ALWAYS: 2,
}
THRESHOLD_RANK = {Risk[level.name]: RiskLevel.HIGH - level for level in RiskLevel}
NETWORK_RANK = {NetworkAccess.HOST: 0, NetworkAccess.NONE: 1}
ALLOWED_RANK = {True: 0, False: 1}
"""A yes/no permission: forbidding is stricter."""

MAX_COST_USD = Decimal("99999999")  # what Policy's DecimalField(12, 4) can hold
MAX_ITERATIONS = 10_000
AGENT_KIND = re.compile(r"^(native|acp:[A-Za-z0-9_.-]{1,60})$")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
ACP_TOOL_KINDS = (
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode",
    "other",
)  # fmt: skip
"""The tool kinds an external (ACP) agent's permission request carries (the ACP ToolKind)."""


@dataclass(frozen=True, slots=True)
class EffectivePolicy:
    """The limits in force for a team. `None` means unlimited; an allow-list of `None` allows
    everything, while an empty tuple allows nothing (two rows whose lists do not overlap)."""

    confirmation_mode: str = ConfirmationMode.RISKY.value
    risk_threshold: str = Risk.HIGH.value
    allowed_tools: tuple[str, ...] | None = None
    allowed_agent_kinds: tuple[str, ...] | None = None
    max_iterations_per_run: int | None = None
    max_cost_per_run_usd: Decimal | None = None
    max_cost_per_month_usd: Decimal | None = None
    max_concurrent_runs: int | None = None
    network: str = NetworkAccess.NONE.value
    """What sandboxed commands (terminal, hooks) may reach; workspaces.sandbox has the last
    word ("host" needs the site's CANVAS_SANDBOX_ALLOW_HOST_NETWORK)."""
    allowed_workspace_kinds: tuple[str, ...] | None = None
    allowed_images: tuple[str, ...] | None = None
    """Docker images, within the site's CANVAS_DOCKER_IMAGES (None: all of those)."""
    docker_cpus: float | None = None
    docker_memory_mb: int | None = None
    docker_pids: int | None = None
    """A container's limits; the site's CANVAS_DOCKER_* cap them too
    (orchestration.workspace.container_limits)."""
    subagents_allowed: bool = dataclass_field(
        default_factory=lambda: settings.CANVAS_SUBAGENTS_ALLOWED
    )
    max_subagent_depth: int | None = dataclass_field(
        default_factory=lambda: settings.CANVAS_SUBAGENT_MAX_DEPTH
    )
    max_children_per_call: int | None = dataclass_field(
        default_factory=lambda: settings.CANVAS_SUBAGENT_MAX_CHILDREN_PER_CALL
    )
    max_children_per_run: int | None = dataclass_field(
        default_factory=lambda: settings.CANVAS_SUBAGENT_MAX_CHILDREN_PER_RUN
    )
    max_concurrent_children: int | None = dataclass_field(
        default_factory=lambda: settings.CANVAS_SUBAGENT_MAX_CONCURRENT_CHILDREN
    )
    """Sub-agents: whether an agent may spawn any, how deep they nest, how many one tool call,
    one run and one parent at a time may have. Unlike the other limits these default to the
    site's CANVAS_SUBAGENT_* settings, which also cap every row (`SUBAGENT_LIMITS`), so a
    policy with no rows still allows depth 3, 5 children per call and so on."""
    acp_auto_allow_kinds: tuple[str, ...] = ()
    """ACP tool kinds whose permission requests the runner grants (the agent's allow_once
    option) without asking a person. Not an allow-list: empty grants none, and since granting
    loosens, rows intersect and no rows grant nothing (`GRANT_LISTS`)."""
    acp_permission_timeout_seconds: int | None = None
    """How long a permission request waits for a person before it is answered as rejected;
    None: the site's CANVAS_ACP_PERMISSION_TIMEOUT_SECONDS, which caps every value too
    (`acp_permission_timeout`)."""

    def tool_allowed(self, name: str) -> bool:
        return self.allowed_tools is None or name in self.allowed_tools

    def agent_kind_allowed(self, kind: str) -> bool:
        return self.allowed_agent_kinds is None or kind in self.allowed_agent_kinds

    def workspace_kind_allowed(self, kind: str) -> bool:
        return self.allowed_workspace_kinds is None or kind in self.allowed_workspace_kinds

    def images(self) -> tuple[str, ...]:
        """The Docker images this team may use: the site's list, narrowed by the policy."""
        site = tuple(settings.CANVAS_DOCKER_IMAGES)
        return _intersect(site, self.allowed_images) or ()

    def acp_auto_allows(self, kind: str | None) -> bool:
        """May an external agent's request for a tool of this kind be granted unasked? A
        request without a kind always goes to a person."""
        return kind is not None and kind in self.acp_auto_allow_kinds

    def acp_permission_timeout(self) -> float:
        """Seconds a permission request waits for a person: the policy's, capped by the site."""
        site = settings.CANVAS_ACP_PERMISSION_TIMEOUT_SECONDS
        return float(min_limit(self.acp_permission_timeout_seconds, site))

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly: tuples as lists, money as floats."""
        data = asdict(self)
        for key, value in data.items():
            if isinstance(value, Decimal):
                data[key] = float(value)
            elif isinstance(value, tuple):
                data[key] = list(value)
        return data


def stricter_rank(a: str, b: str, ranks: Mapping[str, int]) -> str:
    return a if ranks[a] >= ranks[b] else b


def min_limit(a, b):
    """The smaller limit; None (unlimited) never wins over a number."""
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _intersect(a: tuple[str, ...] | None, b: tuple[str, ...] | None) -> tuple[str, ...] | None:
    if a is None:
        return b
    if b is None:
        return a
    return tuple(name for name in a if name in b)


def _allow_list(value: Iterable[str] | None) -> tuple[str, ...] | None:
    # In the database an empty list means "no restriction".
    items = tuple(dict.fromkeys(value or ()))
    return items or None


ALLOW_LISTS = frozenset(
    ("allowed_tools", "allowed_agent_kinds", "allowed_workspace_kinds", "allowed_images")
)
"""EffectivePolicy's allow-lists: stored as JSON lists, where empty means no restriction."""
GRANT_LISTS = frozenset(("acp_auto_allow_kinds",))
"""Lists of what is granted without asking: empty grants nothing. They intersect like the
allow-lists, but as tuples, never None."""


def _list_value(key: str, value: Any) -> Any:
    if key in ALLOW_LISTS:
        return _allow_list(value)
    if key in GRANT_LISTS:
        return tuple(dict.fromkeys(value or ()))
    return value


def _from_row(row: Policy) -> EffectivePolicy:
    values = {f.name: getattr(row, f.name) for f in dataclass_fields(EffectivePolicy)}
    return EffectivePolicy(**{k: _list_value(k, v) for k, v in values.items()})


RANKED = {
    "confirmation_mode": CONFIRMATION_RANK,
    "risk_threshold": THRESHOLD_RANK,
    "network": NETWORK_RANK,
    "subagents_allowed": ALLOWED_RANK,
}
"""Fields whose stricter value is the higher ranked; allow-lists and grant lists intersect; the
rest are limits (the smaller wins, None being no limit)."""


def _stricter(name: str, a: Any, b: Any) -> Any:
    if name in RANKED:
        return stricter_rank(a, b, RANKED[name])
    if name in ALLOW_LISTS or name in GRANT_LISTS:
        return _intersect(a, b)
    return min_limit(a, b)


def combine(a: EffectivePolicy, b: EffectivePolicy) -> EffectivePolicy:
    """The stricter value of every field of two policies."""
    return EffectivePolicy(
        **{
            f.name: _stricter(f.name, getattr(a, f.name), getattr(b, f.name))
            for f in dataclass_fields(EffectivePolicy)
        }
    )


SUBAGENT_LIMITS = (
    "subagents_allowed", "max_subagent_depth", "max_children_per_call", "max_children_per_run",
    "max_concurrent_children",
)  # fmt: skip
"""The fields whose built-in values are the site's CANVAS_SUBAGENT_* settings, which cap every
row as well."""


def effective_from_rows(rows: Iterable[Policy]) -> EffectivePolicy:
    """Without rows: confirm risky actions at HIGH, sub-agents as the site's settings say,
    nothing else limited."""
    result = EffectivePolicy()
    for i, row in enumerate(rows):
        policy = _from_row(row)
        result = policy if i == 0 else combine(result, policy)
    # The site's settings cap only the sub-agent fields: combining whole policies with the
    # built-in ones would also raise a row's confirmation mode to RISKY.
    site = EffectivePolicy()
    return replace(
        result, **{k: _stricter(k, getattr(result, k), getattr(site, k)) for k in SUBAGENT_LIMITS}
    )


def policy_for_team(team_id: int) -> EffectivePolicy:
    """The site default combined with the team's own row. Cheap (one query): runners call it
    at every slice so a policy change takes effect mid-run."""
    rows = Policy.objects.filter(Q(team__isnull=True) | Q(team_id=team_id))
    return effective_from_rows(rows)


@dataclass(frozen=True, slots=True)
class PolicyLayers:
    """What a policy page shows side by side: each row as a policy, and their combination."""

    site: EffectivePolicy | None
    """The site default row; None when the site has none (then only the built-in defaults)."""
    team: EffectivePolicy | None
    """The team's own row; None until an admin sets one."""
    effective: EffectivePolicy


def policy_layers(team_id: int) -> PolicyLayers:
    """The site default, the team's row and the effective policy, from one query."""
    rows = list(Policy.objects.filter(Q(team__isnull=True) | Q(team_id=team_id)))
    site = next((_from_row(row) for row in rows if row.team_id is None), None)
    own = next((_from_row(row) for row in rows if row.team_id == team_id), None)
    return PolicyLayers(site=site, team=own, effective=effective_from_rows(rows))


# --- a conversation's requested overrides ---------------------------------------------------

LOOSER = "a conversation may tighten its team's policy, never loosen it"


def _decimal(value: Any, field: str) -> Decimal:
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        raise InvalidInput(f"{field} must be a number.") from None
    if not number.is_finite() or number < 0 or number > MAX_COST_USD:
        raise InvalidInput(f"{field} must be between 0 and {MAX_COST_USD}.")
    return number


def _ranked(value: Any, field: str, ranks: Mapping[str, int]) -> str:
    if value not in ranks:
        raise InvalidInput(f"{field} must be one of {', '.join(map(str, ranks))}.")
    return str(value)


def _no_looser(
    requested: Mapping[str, Any], field: str, ranks: Mapping[str, int], current: str
) -> str:
    """The requested rank for `field`, or the policy's when none is asked for."""
    value = requested.get(field)
    if value is None:
        return current
    value = _ranked(value, field, ranks)
    if ranks[value] < ranks[current]:
        raise InvalidInput(
            f"{field} {value!r} is looser than the team policy ({current!r}): {LOOSER}."
        )
    return value


def tighten(effective: EffectivePolicy, requested: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a conversation's requested overrides against its team's effective policy.

    `requested` may hold confirmation_mode, risk_threshold, max_iterations, max_cost_usd and
    tools (None or absent: take the policy's). Returns all five resolved: the mode and
    threshold, max_iterations (the request, else the policy's limit capped by the site
    default), max_cost_usd (float or None), tools (a tuple, or None when not requested; the
    caller filters its default set with `tool_allowed`). Raises InvalidInput saying which
    request is looser than the policy.
    """
    unknown = set(requested) - {
        "confirmation_mode", "risk_threshold", "max_iterations", "max_cost_usd", "tools",
    }  # fmt: skip
    if unknown:
        raise InvalidInput(f"unknown overrides: {', '.join(sorted(unknown))}.")
    out: dict[str, Any] = {}

    out["confirmation_mode"] = _no_looser(
        requested, "confirmation_mode", CONFIRMATION_RANK, effective.confirmation_mode
    )
    out["risk_threshold"] = _no_looser(
        requested, "risk_threshold", THRESHOLD_RANK, effective.risk_threshold
    )

    limit = effective.max_iterations_per_run
    iterations = requested.get("max_iterations")
    if iterations is not None:
        if isinstance(iterations, bool) or not isinstance(iterations, int):
            raise InvalidInput("max_iterations must be a whole number.")
        if not 1 <= iterations <= MAX_ITERATIONS:
            raise InvalidInput(f"max_iterations must be between 1 and {MAX_ITERATIONS}.")
        if limit is not None and iterations > limit:
            raise InvalidInput(
                f"max_iterations {iterations} is above the team policy's limit of {limit} "
                f"iterations per run: {LOOSER}."
            )
        out["max_iterations"] = iterations
    else:
        out["max_iterations"] = min_limit(limit, settings.CANVAS_MAX_ITERATIONS)

    run_limit = effective.max_cost_per_run_usd
    cost = requested.get("max_cost_usd")
    if cost is not None:
        cost = _decimal(cost, "max_cost_usd")
        if run_limit is not None and cost > run_limit:
            raise InvalidInput(
                f"max_cost_usd {cost} is above the team policy's limit of ${run_limit} per "
                f"run: {LOOSER}."
            )
    cost = cost if cost is not None else run_limit
    out["max_cost_usd"] = float(cost) if cost is not None else None

    tools = requested.get("tools")
    if tools is not None:
        if isinstance(tools, str) or not all(isinstance(t, str) for t in tools):
            raise InvalidInput("tools must be a list of tool names.")
        tools = tuple(dict.fromkeys(tools))
        refused = [name for name in tools if not effective.tool_allowed(name)]
        if refused:
            raise InvalidInput(
                f"tools not allowed by the team policy: {', '.join(refused)}: {LOOSER}."
            )
    out["tools"] = tools
    return out


# --- changing a policy ------------------------------------------------------------------------

EDITABLE = (
    "confirmation_mode", "risk_threshold", "allowed_tools", "allowed_agent_kinds",
    "max_iterations_per_run", "max_cost_per_run_usd", "max_cost_per_month_usd",
    "max_concurrent_runs", "network", "allowed_workspace_kinds", "allowed_images",
    "docker_cpus", "docker_memory_mb", "docker_pids", *SUBAGENT_LIMITS,
    "acp_auto_allow_kinds", "acp_permission_timeout_seconds",
)  # fmt: skip
MAX_DOCKER_CPUS = 1024.0
MAX_DOCKER_MEMORY_MB = 4 * 1024 * 1024
MAX_DOCKER_PIDS = 1_000_000
MAX_SUBAGENT_DEPTH = 20
MAX_CHILDREN_PER_CALL = 100
MAX_CHILDREN_PER_RUN = 10_000
MAX_CONCURRENT_CHILDREN = 1_000
MAX_ACP_PERMISSION_TIMEOUT_SECONDS = 86_400
WORKSPACE_KIND = re.compile(rf"^({'|'.join(KINDS)})$")


def _names(value: Any, field: str, pattern: re.Pattern[str]) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise InvalidInput(f"{field} must be a list of names.")
    bad = [v for v in value if not isinstance(v, str) or not pattern.fullmatch(v)]
    if bad:
        raise InvalidInput(f"{field} has invalid entries: {', '.join(map(repr, bad))}.")
    return list(dict.fromkeys(value))


def _kinds(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise InvalidInput(f"{field} must be a list of tool kinds.")
    bad = [v for v in value if v not in ACP_TOOL_KINDS]
    if bad:
        raise InvalidInput(
            f"{field} has invalid entries: {', '.join(map(repr, bad))}; "
            f"the tool kinds are {', '.join(ACP_TOOL_KINDS)}."
        )
    return list(dict.fromkeys(value))


def _count(value: Any, field: str, top: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
        raise InvalidInput(f"{field} must be a whole number from 1 to {top}, or null.")
    return value


def _cpus(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise InvalidInput("docker_cpus must be a number of CPUs, or null.")
    number = float(value)
    if not 0.01 <= number <= MAX_DOCKER_CPUS:
        raise InvalidInput(f"docker_cpus must be from 0.01 to {MAX_DOCKER_CPUS:g}, or null.")
    return number


def _flag(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(f"{field} must be true or false.")
    return value


def _network(value: Any) -> str:
    value = _ranked(value, "network", NETWORK_RANK)
    if value == NetworkAccess.HOST and not settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK:
        raise InvalidInput(
            "network 'host' is not allowed on this site: it would let commands reach the "
            "host's own services (its database included). A site administrator may allow it "
            "with CANVAS_SANDBOX_ALLOW_HOST_NETWORK=true."
        )
    return value


def _money(value: Any, key: str) -> Decimal | None:
    return None if value is None else _decimal(value, key).quantize(Decimal("0.0001"))


_CLEANERS: dict[str, Callable[[Any, str], Any]] = {
    "confirmation_mode": lambda value, key: _ranked(value, key, CONFIRMATION_RANK),
    "risk_threshold": lambda value, key: _ranked(value, key, THRESHOLD_RANK),
    "allowed_tools": lambda value, key: _names(value, key, TOOL_NAME),
    "allowed_agent_kinds": lambda value, key: _names(value, key, AGENT_KIND),
    "max_iterations_per_run": lambda value, key: _count(value, key, MAX_ITERATIONS),
    "max_cost_per_run_usd": _money,
    "max_cost_per_month_usd": _money,
    "max_concurrent_runs": lambda value, key: _count(value, key, 10_000),
    "network": lambda value, key: _network(value),
    "allowed_workspace_kinds": lambda value, key: _names(value, key, WORKSPACE_KIND),
    "allowed_images": lambda value, key: _names(value, key, IMAGE_NAME),
    "docker_cpus": lambda value, key: _cpus(value),
    "docker_memory_mb": lambda value, key: _count(value, key, MAX_DOCKER_MEMORY_MB),
    "docker_pids": lambda value, key: _count(value, key, MAX_DOCKER_PIDS),
    "subagents_allowed": _flag,
    "max_subagent_depth": lambda value, key: _count(value, key, MAX_SUBAGENT_DEPTH),
    "max_children_per_call": lambda value, key: _count(value, key, MAX_CHILDREN_PER_CALL),
    "max_children_per_run": lambda value, key: _count(value, key, MAX_CHILDREN_PER_RUN),
    "max_concurrent_children": lambda value, key: _count(value, key, MAX_CONCURRENT_CHILDREN),
    "acp_auto_allow_kinds": _kinds,
    "acp_permission_timeout_seconds": (
        lambda value, key: _count(value, key, MAX_ACP_PERMISSION_TIMEOUT_SECONDS)
    ),
}
"""How each editable field is checked and normalised (the service's own words on refusal)."""


def _clean(fields: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(fields) - set(EDITABLE)
    if unknown:
        raise InvalidInput(f"unknown policy fields: {', '.join(sorted(unknown))}.")
    return {key: _CLEANERS[key](value, key) for key, value in fields.items()}


def _snapshot(row: Policy) -> dict[str, Any]:
    data = {key: getattr(row, key) for key in EDITABLE}
    return {k: (str(v) if isinstance(v, Decimal) else v) for k, v in data.items()}


def policy_update(*, by, team: Team | None, **fields: Any) -> Policy:
    """Change the team's policy row (created on first change); `team=None` is the site
    default, which only site admins may change. Audited with before and after."""
    if team is None:
        if not getattr(by, "is_superuser", False):
            raise Forbidden("only site administrators can change the site default policy.")
    elif not role_allows(team_role(by, team.pk), Action.ADMINISTER):
        raise Forbidden("only team admins and owners can change the team policy.")
    cleaned = _clean(fields)
    with transaction.atomic():
        # get_or_create re-reads when a concurrent first change wins the unique constraint.
        row, created = Policy.objects.select_for_update().get_or_create(team=team)
        before = None if created else _snapshot(row)
        for key, value in cleaned.items():
            setattr(row, key, value)
        row.updated_by = by if getattr(by, "is_authenticated", False) else None
        row.save()
        row.refresh_from_db()  # normalise decimals as stored, for the audit and the caller
        audit_record(
            actor=by, kind="policy.updated", team=team, target=team.name if team else "site",
            data={"before": before, "after": _snapshot(row)},
        )  # fmt: skip
    return row
