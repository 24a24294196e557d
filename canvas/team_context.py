"""The browser's current team: which of the user's teams pages show and create things in.

It lives in the session (`request.session["team_id"]`) and is re-checked on every request, so a
user removed from a team falls back to their default team instead of seeing a stale choice.
The context processor exposes it to every template lazily: pages that never mention it (the
list's 2-second poll, say) cost no queries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from teams.models import Team
from teams.permissions import Action, role_allows, team_role, teams_for
from teams.services import team_default_for

SESSION_KEY = "team_id"
_CACHE_ATTR = "_canvas_team_context"


@dataclass(frozen=True)
class TeamContext:
    current_team: Team | None
    """None only for a user who belongs to no team yet."""
    teams: list[Team]
    role: str | None
    """The user's role in `current_team`."""

    @property
    def can_act(self) -> bool:
        return role_allows(self.role, Action.ACT)

    @property
    def can_administer(self) -> bool:
        return role_allows(self.role, Action.ADMINISTER)


def _resolve(request: HttpRequest) -> TeamContext:
    user = request.user
    teams = list(teams_for(user))
    by_id = {team.pk: team for team in teams}
    chosen = by_id.get(request.session.get(SESSION_KEY))
    if chosen is None:
        default = team_default_for(user) if user.is_authenticated else None
        # The default is ignored if it is not visible (it always is, unless the user is inactive).
        chosen = by_id.get(default.pk) if default is not None else None
        if chosen is None and teams:
            chosen = teams[0]
    role = team_role(user, chosen.pk) if chosen is not None else None
    return TeamContext(current_team=chosen, teams=teams, role=role)


def team_context(request: HttpRequest) -> TeamContext:
    """The current team for this request; computed once per request."""
    cached = getattr(request, _CACHE_ATTR, None)
    if cached is None:
        cached = _resolve(request)
        setattr(request, _CACHE_ATTR, cached)
    return cached


def current_team_set(request: HttpRequest, team: Team) -> None:
    """Make `team` current. The caller has checked the user may see it."""
    request.session[SESSION_KEY] = team.pk
    if hasattr(request, _CACHE_ATTR):
        delattr(request, _CACHE_ATTR)


def context_processor(request: HttpRequest) -> dict[str, Any]:
    """Context processor: `team_context`, plus `current_team`, `teams` and `team_role` for
    short template expressions. All lazy; templates call the callables on first use."""
    lazy = SimpleLazyObject(lambda: team_context(request))
    return {
        "team_context": lazy,
        "current_team": lambda: lazy.current_team,
        "teams": lambda: lazy.teams,
        "team_role": lambda: lazy.role,
    }
