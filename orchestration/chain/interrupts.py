"""Interrupt delivery: how a person's Interrupt reaches the slice running the conversation.

The truth is the row's `interrupt_requested_at`, written by the interrupt service; the lease
keeper reads it back with every renewal (orchestration.chain.heartbeat). This module is the fast
path on top: after commit it publishes the conversation id on one Redis channel that every
worker process's keeper listens to (in the embedded mode, where the worker shares the web
process, it tells the keeper directly). A lost message only delays the stop to the next
renewal. Cheap to import: the web process uses it.
"""

from __future__ import annotations

import functools
import logging
import uuid

import redis
from django.conf import settings
from django.db import transaction

logger = logging.getLogger(__name__)


def interrupt_channel() -> str:
    """The channel name; Redis pub/sub ignores database numbers, so the number is part of it."""
    db = redis.connection.parse_url(settings.REDIS_URL).get("db", 0)
    return f"canvas:interrupts:{db}"


def interrupt_redis(url: str, **options: object) -> redis.Redis:
    """A client for the interrupt channel. Pub/sub ignores database numbers, so it selects
    none (database 0): a URL naming a database the server lacks still works."""
    pool = redis.ConnectionPool.from_url(url, **options)
    pool.connection_kwargs["db"] = 0
    return redis.Redis(connection_pool=pool)


@functools.cache
def _client(url: str) -> redis.Redis:
    return interrupt_redis(url, socket_timeout=2, socket_connect_timeout=2)


def interrupt_publish_on_commit(conversation_id: uuid.UUID | str) -> None:
    """Tell the runner of `conversation_id`, wherever it runs, once the Interrupt is committed."""
    transaction.on_commit(lambda: interrupt_publish(str(conversation_id)))


def interrupt_publish(conversation_id: str) -> None:
    if not settings.REDIS_URL:
        from .heartbeat import interrupt_local

        interrupt_local(conversation_id)
        return
    try:
        _client(settings.REDIS_URL).publish(interrupt_channel(), conversation_id)
    except redis.RedisError:  # the keeper still finds it on the row at its next renewal
        logger.warning("could not publish the interrupt of %s", conversation_id, exc_info=True)
