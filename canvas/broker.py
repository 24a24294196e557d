"""A worker must outlive a Redis restart (issue 25).

kombu 5.7's Redis QoS acks and rejects through `channel.pool`, built on first use from
`channel.connection.client`. A late ack (CELERY_TASK_ACKS_LATE) that arrives after the broker
connection dropped finds the channel closed (`connection.client` is None), raises
AttributeError("'NoneType' object has no attribute 'hostname'") from `_connparams` inside the
hub's close, and Celery stops the whole worker as "Unrecoverable". Such a message cannot be
acked on that channel anyway: left unacked, the broker restores it after the visibility
timeout, and the run's lease makes a second delivery exit at once. So the ack is dropped with
a warning instead of killing the worker.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)


def survive_acks_on_a_closed_channel() -> None:
    """Patch kombu's Redis QoS once per process (idempotent)."""
    from kombu.transport import redis as transport

    qos = transport.QoS
    if getattr(qos, "_canvas_patched", False):
        return
    qos.ack = _guarded(qos.ack)
    qos.reject = _guarded(qos.reject)
    qos._canvas_patched = True


def _guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def guarded(self: Any, delivery_tag: Any, *args: Any, **kwargs: Any) -> Any:
        if _closed(self.channel):
            logger.warning(
                "broker channel closed before %s of delivery %s: left for the broker to "
                "restore", method.__name__, delivery_tag,
            )  # fmt: skip
            return None
        return method(self, delivery_tag, *args, **kwargs)

    return guarded


def _closed(channel: Any) -> bool:
    connection = getattr(channel, "connection", None)
    return connection is None or getattr(connection, "client", None) is None
