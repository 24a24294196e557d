"""Open websockets follow changes of access: a hint per user, sent after commit.

A websocket is authorized once, at its handshake, and can stay open for days. Every socket
therefore also joins its user's group (`user_access_group`). Whatever can take access away
sends `access.changed` to that group once its transaction commits: an API token revoked or
deleted, a membership removed or its role changed (a team's deletion removes its memberships),
the user changed (deactivated, password, superuser flag), deleted or logged out. Each of the
user's sockets then re-checks its credentials and its conversation against the database and
closes with a `canvas.ws_close.CloseCode` when they no longer hold (see
`EventRelayConsumer.recheck_access`). The message says nothing about what changed: the
database decides, so a stale or duplicated hint is harmless.

Hooked to model signals rather than to the services, so every path (API, pages, the admin,
a shell) is covered; teams never imports channels, the project joins the two here (connected
from `CanvasConfig.ready`). Like event hints these are at-most-once: consumers also re-check
on a slow timer (`consumers.ACCESS_RECHECK_SECONDS`).
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model, user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete, post_save

from teams.models import ApiToken, Membership

logger = logging.getLogger(__name__)

ACCESS_MESSAGE_TYPE = "access.changed"
"""Dispatched to `EventRelayConsumer.access_changed`."""


def user_access_group(user_id: int) -> str:
    return f"access.user.{int(user_id)}"


def publish_access_changed(user_id: int | None, *, reason: str) -> None:
    """Tell the user's open sockets to re-check, once the current transaction commits."""
    if user_id is None:
        return
    transaction.on_commit(lambda: _send(user_id, reason))


def _send(user_id: int, reason: str) -> None:
    try:
        async_to_sync(get_channel_layer().group_send)(
            user_access_group(user_id), {"type": ACCESS_MESSAGE_TYPE, "reason": reason}
        )
    except Exception as exc:  # the consumers' timer re-checks; the change itself is committed
        logger.warning("access hint for user %s failed: %r", user_id, exc)


def _token_saved(sender: Any, instance: ApiToken, created: bool, **kwargs: Any) -> None:
    if not created and instance.revoked_at is not None:
        publish_access_changed(instance.user_id, reason="token.revoked")


def _token_deleted(sender: Any, instance: ApiToken, **kwargs: Any) -> None:
    publish_access_changed(instance.user_id, reason="token.deleted")


def _membership_saved(sender: Any, instance: Membership, created: bool, **kwargs: Any) -> None:
    if not created:  # a new membership takes nothing away
        publish_access_changed(instance.user_id, reason="membership.changed")


def _membership_deleted(sender: Any, instance: Membership, **kwargs: Any) -> None:
    publish_access_changed(instance.user_id, reason="membership.deleted")


def _user_saved(sender: Any, instance: Any, created: bool, update_fields=None, **kwargs: Any):
    # Every login saves last_login; that takes nothing away.
    if not created and set(update_fields or ()) != {"last_login"}:
        publish_access_changed(instance.pk, reason="user.changed")


def _user_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    publish_access_changed(instance.pk, reason="user.deleted")


def _logged_out(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    if user is None:
        return
    # Django sends this signal before it flushes the session, and outside a transaction the
    # hint goes out at once: a socket re-checking now would still find the session and stay
    # open. End the session first (logout's own flush then finds nothing left to do).
    session = getattr(request, "session", None)
    if session is not None:
        session.flush()
    publish_access_changed(user.pk, reason="user.logged_out")


def connect_access_signals() -> None:
    user_model = get_user_model()
    uid = "canvas.access_signals"
    post_save.connect(_token_saved, sender=ApiToken, dispatch_uid=f"{uid}.token_saved")
    post_delete.connect(_token_deleted, sender=ApiToken, dispatch_uid=f"{uid}.token_deleted")
    post_save.connect(_membership_saved, sender=Membership, dispatch_uid=f"{uid}.member_saved")
    post_delete.connect(
        _membership_deleted, sender=Membership, dispatch_uid=f"{uid}.member_deleted"
    )
    post_save.connect(_user_saved, sender=user_model, dispatch_uid=f"{uid}.user_saved")
    post_delete.connect(_user_deleted, sender=user_model, dispatch_uid=f"{uid}.user_deleted")
    user_logged_out.connect(_logged_out, dispatch_uid=f"{uid}.logged_out")
