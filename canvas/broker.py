"""A worker must outlive a Redis restart while it holds unacknowledged tasks (issue 25).

The fault, in celery 5.7.0 with kombu 5.7.0 (the newest releases; kombu's main branch is the
same), as a worker with CELERY_TASK_ACKS_LATE meets it:

1. The broker connection breaks. The consumer's `on_connection_error_after_connected` calls
   `connection.collect()`: it closes the channels, then detaches the transport from its
   connection (`transport.client = None`).
2. kombu's Redis `Channel.close` is not exception-safe: reading the reply of the pending BRPOP
   (added in celery/kombu#1733) or deleting the pidbox's fanout binding raises a connection
   error before the channel is marked closed, and `collect()` swallows it.
3. Celery 5.7 then closes the connection again (added by celery/celery#10242 for GH-9705).
   If Redis is back by then, that second close gets past step 2 and restores the unacked
   messages (the slices still running), which needs a new connection pool built from
   `transport.client`: None, so `_connparams` raises AttributeError("'NoneType' object has
   no attribute 'hostname'"). Not a connection error, so `ignore_errors` lets it through and
   the worker stops as "Unrecoverable". The late ack of each running task takes the same path
   (`QoS.ack` -> `_connparams`) when it finishes: that stopped workers tens of seconds after
   Redis returned. The same AttributeError was reported for kombu 3 in celery/kombu#582.

The fix: a channel whose transport is detached raises the transport's own connection error
where it would build a pool, which every caller above already handles as "the broker is
gone" (the close is abandoned, the worker reconnects). Acks and rejects on such a channel are
dropped with a warning instead of a CRITICAL traceback: the message cannot be acked there. A
message left unacked comes back after the visibility timeout if Redis kept it (a restart
without persistence loses it); either way the run's lease and the sweeper, not redelivery,
continue the run (orchestration/chain/sweep.py). Remove this once a kombu release closes a
channel safely on a broken connection (then pin it in pyproject.toml).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)


def survive_a_lost_broker_connection() -> None:
    """Patch kombu's Redis transport once per process (idempotent)."""
    from kombu.transport import redis as transport

    if getattr(transport.Channel, "_canvas_patched", False):
        return
    transport.Channel._connparams = _needs_a_broker(transport.Channel._connparams)
    transport.QoS.ack = _dropped_when_detached(transport.QoS.ack)
    transport.QoS.reject = _dropped_when_detached(transport.QoS.reject)
    transport.Channel._canvas_patched = True


def _needs_a_broker(connparams: Callable[..., dict]) -> Callable[..., dict]:
    @functools.wraps(connparams)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> dict:
        if _detached(self):
            from redis.exceptions import ConnectionError as BrokerGone

            raise BrokerGone("this channel's broker connection was closed")
        return connparams(self, *args, **kwargs)

    return guarded


def _dropped_when_detached(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def guarded(self: Any, delivery_tag: Any, *args: Any, **kwargs: Any) -> Any:
        if _detached(self.channel):
            logger.warning(
                "broker connection closed before the %s of delivery %s: left for the broker "
                "to restore", method.__name__, delivery_tag,
            )  # fmt: skip
            return None
        return method(self, delivery_tag, *args, **kwargs)

    return guarded


def _detached(channel: Any) -> bool:
    """Whether the channel's transport lost its connection (closed, or collected)."""
    transport = getattr(channel, "connection", None)
    return transport is None or getattr(transport, "client", None) is None
