"""The team's Policy page: every limit with the site default, the team's own value and the one
in force (teams.policies.policy_layers); admins and owners change the team's row through
teams.policies.policy_update, as the API's PUT /api/teams/{id}/policy does.

The effective value is the stricter of the site default and the team's row, so a team can only
tighten the site: a looser team value is kept but marked as having no effect. Refusals are the
service's own words (ranges, tool names, the host network), shown above the form.
"""

from __future__ import annotations

from decimal import Decimal
from functools import partial
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_POST

from common.errors import ServiceError
from teams.models import Team
from teams.permissions import Action
from teams.policies import (
    ACP_TOOL_KINDS,
    EDITABLE,
    EffectivePolicy,
    policy_layers,
    policy_update,
)
from teams.vocabulary import ConfirmationMode, NetworkAccess, Risk

from .settings_pages import SettingsPage, administers, settings_team
from .team_forms import PolicyForm

TEMPLATE = "canvas/team_policy.html"
BUILT_IN = EffectivePolicy()
"""What applies with no rows at all."""


def _shown(key: str, value: Any) -> str:
    """One policy value in words."""
    if key == "confirmation_mode":
        return ConfirmationMode(value).label
    if key == "risk_threshold":
        return Risk(value).label
    if key == "network":
        return NetworkAccess(value).label
    if isinstance(value, bool):
        return "allowed" if value else "forbidden"
    if key == "acp_auto_allow_kinds":
        # Not an allow-list: empty grants nothing.
        return ", ".join(value) if value else "none (ask for every request)"
    if key == "acp_permission_timeout_seconds":
        return "the site's limit" if value is None else f"{value} s"
    if key in ("allowed_tools", "allowed_agent_kinds", "allowed_workspace_kinds", "allowed_images"):
        if value is None:
            return "all the site offers" if key == "allowed_images" else "all"
        return ", ".join(value) if value else "none (the two lists share no name)"
    if value is None:
        return "no limit"
    if isinstance(value, Decimal):
        return f"${value.normalize():f}"
    return str(value)


def _in_force(key: str, effective: EffectivePolicy) -> Any:
    # The site's setting caps the permission wait beyond what the rows say.
    if key == "acp_permission_timeout_seconds":
        return int(effective.acp_permission_timeout())
    return getattr(effective, key)


def _rows(team_policy: EffectivePolicy | None, site: EffectivePolicy | None, effective):
    for key in EDITABLE:
        own = getattr(team_policy, key) if team_policy is not None else None
        in_force = _in_force(key, effective)
        yield {
            "key": key,
            "label": PolicyForm.base_fields[key].label,
            "site": _shown(key, getattr(site or BUILT_IN, key)),
            "team": _shown(key, own) if team_policy is not None else "—",
            "effective": _shown(key, in_force),
            # The team asked for something the site's stricter default overrides.
            "overridden": team_policy is not None and own != in_force,
        }


def _initial(team_policy: EffectivePolicy | None) -> dict[str, Any]:
    current = team_policy or BUILT_IN
    data = {key: getattr(current, key) for key in EDITABLE}
    for key in ("allowed_tools", "allowed_agent_kinds", "acp_auto_allow_kinds"):
        data[key] = ", ".join(data[key] or ())
    return data


def _context(
    request: HttpRequest, team: Team, *, form: PolicyForm | None = None,
    notice: ServiceError | None = None, saved: bool = False,
) -> dict[str, Any]:  # fmt: skip
    layers = policy_layers(team.pk)
    return {
        "team": team,
        "rows": list(_rows(layers.team, layers.site, layers.effective)),
        "has_site_row": layers.site is not None,
        "has_team_row": layers.team is not None,
        "site_max_iterations": settings.CANVAS_MAX_ITERATIONS,
        "site_acp_permission_timeout": settings.CANVAS_ACP_PERMISSION_TIMEOUT_SECONDS,
        "acp_tool_kinds": ACP_TOOL_KINDS,
        "can_administer": administers(request, team),
        "form": form or PolicyForm(initial=_initial(layers.team)),
        "notice": notice,
        "saved": saved,
    }


PAGE = SettingsPage(TEMPLATE, "team-policy", _context, "Policy")


team_policy = PAGE.view()


@login_required
@require_POST
def policy_set(request: HttpRequest, team_id: int) -> HttpResponse:
    team = settings_team(request, team_id, Action.ADMINISTER)
    form = PolicyForm(request.POST)
    update = partial(policy_update, by=request.user, team=team)
    return PAGE.submit(request, team, "policy", form, update, done={"saved": True}, form=form)
