"""The Runs page's live table: rendered rows for the htmx ws extension.

Protocol: on connect the consumer sends the whole table body (`#runs-body`, out of band), then
once a second asks the database whether anything of the team's runs moved (canvas.runs.
runs_signature: two aggregate queries) and reads the rows only when it did. It sends only the
rows whose HTML changed (`#run-<key>`, `#run-approvals-<key>`), or the whole body again when
rows came, went or moved; an unchanged approval row is never re-sent, so a rejection reason
being typed in it survives. Active rows' durations are re-rendered from the rows already read.

The page carries its filters in the socket's query string (status, kind, person, as the page
reads them). Access is checked at connect, again when canvas.access_signals says it may have
changed, and every ACCESS_RECHECK_SECONDS: a user removed from the team is closed with 4404.
There are no team-wide hints on the channel layer: the run loop appends events on hot paths,
and a second's poll of two aggregates per open Runs page costs less than a publish per append.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.http import QueryDict
from django.template.loader import render_to_string
from django.utils import timezone

from common.errors import Forbidden, NotFound
from teams.models import Team
from teams.permissions import Action, role_allows, team_role
from teams.services import team_get_for

from .access_signals import user_access_group
from .consumers import ACCESS_RECHECK_SECONDS
from .runs import RunFilters, TeamRuns, runs_signature, team_runs
from .runs_views import TEMPLATE, filters_from, rows_context
from .ws_auth import current_user
from .ws_close import CloseCode
from .ws_origin import origin_allowed

logger = logging.getLogger(__name__)

POLL_SECONDS = 1.0
REREAD_SECONDS = 10.0
"""While some row is active, the rows are read again at least this often even when nothing
was appended: a worker host that stops answering changes what a running row waits for."""


def table_frame(
    sent: dict[str, str], order: list[str], rendered: dict[str, str], body: str
) -> tuple[str, list[str]]:
    """What to send, given what was `sent` (element id -> HTML, in `order`) and the table as it
    is now (`rendered`, in its own order): the changed rows, or `body` whole when the rows
    themselves changed; "" when nothing did. Returns the frame and the new order."""
    now_order = list(rendered)
    if now_order != order:
        return body, now_order
    return "".join(html for key, html in rendered.items() if sent.get(key) != html), order


def _access(scope: dict[str, Any], team_id: int) -> tuple[CloseCode | None, Any, Team | None]:
    user = current_user(scope)
    if user is None:
        return CloseCode.CREDENTIALS_GONE, None, None
    try:
        return None, user, team_get_for(user, team_id, Action.VIEW)
    except (NotFound, Forbidden):
        return CloseCode.NOT_FOUND, None, None


class RunsPageConsumer(AsyncWebsocketConsumer):
    """/ws/ui/teams/{team_id}/runs/ — the Runs table, kept current."""

    team: Team | None = None
    access_group: str | None = None
    closing = False
    can_act = False
    _task: asyncio.Task | None = None

    async def connect(self) -> None:
        if self.scope.get("auth_throttled"):
            await self.close(code=CloseCode.THROTTLED)
            return
        if not origin_allowed(self.scope):
            await self.close(code=CloseCode.FORBIDDEN_ORIGIN)
            return
        user = self.scope.get("user")
        if user is not None and user.is_authenticated:
            # Joined before the check, so a change committed after it is not missed.
            self.access_group = user_access_group(user.pk)
            await self.channel_layer.group_add(self.access_group, self.channel_name)
        query = QueryDict(mutable=True)
        for key, values in parse_qs(self.scope.get("query_string", b"").decode()).items():
            query.setlist(key, values)
        self.filters: RunFilters = filters_from(query)
        team_id = self.scope["url_route"]["kwargs"]["team_id"]
        refusal, user, self.team = await database_sync_to_async(_access)(self.scope, team_id)
        if refusal is not None:
            await self.close(code=refusal)
            return
        self.can_act = await database_sync_to_async(self._can_act)(user)
        self.sent: dict[str, str] = {}
        self.order: list[str] = []
        await self.accept()
        self._task = asyncio.create_task(self._run())

    def _can_act(self, user: Any) -> bool:
        assert self.team is not None
        return role_allows(team_role(user, self.team.pk), Action.ACT)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        signature: Any = None
        runs: TeamRuns | None = None
        read_at = recheck_at = loop.time()
        with contextlib.suppress(asyncio.CancelledError):
            while not self.closing:
                assert self.team is not None
                if loop.time() - recheck_at >= ACCESS_RECHECK_SECONDS:
                    recheck_at = loop.time()
                    if not await self.recheck_access():
                        return
                try:
                    now_signature = await database_sync_to_async(runs_signature)(self.team.pk)
                    stale = runs is not None and any(r.active for r in runs.rows())
                    stale = stale and loop.time() - read_at >= REREAD_SECONDS
                    if runs is None or now_signature != signature or stale:
                        signature, read_at = now_signature, loop.time()
                        runs = await database_sync_to_async(team_runs)(self.team.pk, self.filters)
                    else:
                        runs = TeamRuns(entries=runs.entries, now=timezone.now())
                    await self._send_table(runs)
                except Exception as exc:  # a database outage: the table waits, the socket stays
                    logger.warning("runs table for team %s not refreshed: %r", self.team.pk, exc)
                await asyncio.sleep(POLL_SECONDS)

    async def _send_table(self, runs: TeamRuns) -> None:
        assert self.team is not None
        context = {**rows_context(self.team, runs, can_act=self.can_act), "oob": True}
        rendered: dict[str, str] = {}
        for row in runs.rows():
            rendered[f"run-{row.key}"] = render_to_string(
                f"{TEMPLATE}#run-row", {**context, "row": row}
            )
            if row.pending:
                rendered[f"run-approvals-{row.key}"] = render_to_string(
                    f"{TEMPLATE}#run-approvals", {**context, "row": row}
                )
        body = ""
        if list(rendered) != self.order:  # rows came, went or moved: the body whole
            body = render_to_string(
                f"{TEMPLATE}#runs-body", {**context, "oob": False, "body_oob": True}
            )
        frame, self.order = table_frame(self.sent, self.order, rendered, body)
        self.sent = rendered
        if frame and not self.closing:
            await self.send(text_data=frame)

    async def access_changed(self, message: dict[str, Any]) -> None:
        """canvas.access_signals: something that decides this user's access changed."""
        await self.recheck_access()

    async def recheck_access(self) -> bool:
        if self.closing or self.team is None:
            return False
        refusal, user, _ = await database_sync_to_async(_access)(self.scope, self.team.pk)
        if refusal is not None:
            self.closing = True
            await self.close(code=refusal)
            if self._task is not None and self._task is not asyncio.current_task():
                self._task.cancel()
            return False
        self.scope["user"] = user
        self.can_act = await database_sync_to_async(self._can_act)(user)
        return True

    async def disconnect(self, code: int) -> None:
        self.closing = True
        if self._task is not None:
            self._task.cancel()
        if self.access_group is not None:
            await self.channel_layer.group_discard(self.access_group, self.channel_name)
