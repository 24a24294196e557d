"""The lease heartbeat: one keeper per worker process holds every lease the process runs.

`with Heartbeat(conversation_id, token) as hb:` registers a slice's lease with the process's
`LeaseKeeper` and gives the slice two events: `hb.cancel` (stop the LLM call or command in
flight) and `hb.lost` (the lease is gone, or ran out before it could be renewed).

The keeper runs three daemon threads, whatever the number of slices:
- the renewer renews all the process's leases in one UPDATE on one database connection
  (opened on demand, closed when the process holds no lease), and reads each row's
  `interrupt_requested_at` in the same statement. A dropped connection or a failed statement
  is closed and retried with a short backoff; statements are bounded (statement_timeout) so a
  locked row cannot hold the renewer for long.
- the guard cancels a slice whose lease could not be renewed in time, `margin` seconds before
  the lease runs out, so its command is killed while the lease is still its own: a command
  never runs past its runner's lease, whatever the database does.
- a slice held with time limits (`Heartbeat(..., limits=(soft, hard))`) is cancelled at its
  soft limit and its lease is no longer renewed past its hard one, so it lapses and the sweeper
  gives the run to another runner: the thread pool's stand-in for Celery's time limits, which
  only the prefork pool enforces (a thread cannot be killed; the lease fence refuses whatever it
  still tries to append).
- the watcher (Redis only) listens for Interrupts (orchestration.chain.interrupts) and cancels the
  matching slice at once; without it an Interrupt is still seen at the next renewal.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import redis
from django.conf import settings
from django.db import DatabaseError, InterfaceError, connection
from django.utils import timezone

from conversations.models import Conversation

from . import transient
from .interrupts import interrupt_channel, interrupt_redis

logger = logging.getLogger(__name__)

APPLICATION_NAME = "canvas-lease-keeper"
"""The keeper's connection in pg_stat_activity."""


def renew_interval() -> float:
    return max(0.2, settings.CANVAS_LEASE_SECONDS / 3)


def cancel_margin() -> float:
    """How long before its lease runs out an unrenewed slice is cancelled: time enough to kill
    the command's process group and for clocks to disagree a little."""
    return max(0.5, min(settings.CANVAS_LEASE_SECONDS / 4, 5.0))


@dataclass(eq=False)
class _Lease:
    conversation_id: str
    token: str
    cancel: threading.Event
    lost: threading.Event
    valid_until: float
    """Monotonic time the lease surely lasts until: the last renewal's send time + the TTL."""
    renew_at: float
    cancel_at: float | None = None
    """The soft time limit: the slice is cancelled then (monotonic)."""
    renew_until: float | None = None
    """The hard time limit: the lease is not renewed past it (monotonic)."""


@dataclass(eq=False)
class LeaseKeeper:
    leases: dict[str, _Lease] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _renew_wake: threading.Event = field(default_factory=threading.Event)
    _guard_wake: threading.Event = field(default_factory=threading.Event)
    _started: bool = False

    def hold(
        self, conversation_id: str, token: str, limits: tuple[float, float] | None = None
    ) -> _Lease:
        now = time.monotonic()
        lease = _Lease(
            conversation_id=str(uuid.UUID(str(conversation_id))), token=token,
            cancel=threading.Event(), lost=threading.Event(),
            valid_until=now + settings.CANVAS_LEASE_SECONDS, renew_at=now + renew_interval(),
            cancel_at=now + limits[0] if limits else None,
            renew_until=now + limits[1] if limits else None,
        )  # fmt: skip
        with self._lock:
            self.leases[token] = lease
            if not self._started:
                self._start()
        self._renew_wake.set()
        self._guard_wake.set()
        return lease

    def drop(self, lease: _Lease) -> None:
        with self._lock:
            self.leases.pop(lease.token, None)
        self._renew_wake.set()

    def interrupt(self, conversation_id: str) -> None:
        try:
            conversation_id = str(uuid.UUID(conversation_id))
        except ValueError:
            return
        with self._lock:
            held = [lease for lease in self.leases.values()
                    if lease.conversation_id == conversation_id]  # fmt: skip
        for lease in held:
            lease.cancel.set()

    def _start(self) -> None:
        self._started = True
        loops: list[tuple[str, Callable[[], None]]] = [
            ("lease-renewer", self._renew_loop), ("lease-guard", self._guard_loop),
        ]  # fmt: skip
        if settings.REDIS_URL:
            loops.append(("interrupt-watcher", self._watch_loop))
        for name, loop in loops:
            threading.Thread(target=loop, name=name, daemon=True).start()

    def _renew_loop(self) -> None:
        backoff = 0.05
        while True:
            now = time.monotonic()
            with self._lock:
                leases = [
                    lease for lease in self.leases.values()
                    if not lease.lost.is_set()
                    and (lease.renew_until is None or now < lease.renew_until)
                ]  # fmt: skip
            if not leases:
                _close_quietly()  # hold a connection only while holding leases
                self._renew_wake.wait()
                self._renew_wake.clear()
                continue
            now = time.monotonic()
            due = min(lease.renew_at for lease in leases)
            if due > now:
                self._renew_wake.wait(due - now)
                self._renew_wake.clear()
                continue
            try:
                self._renew(leases)
                backoff = 0.05
            except (DatabaseError, InterfaceError):
                # The fault that cut this connection most likely cut the pool's idle ones too.
                transient.close_broken()
                retry_at = time.monotonic() + backoff
                for lease in leases:
                    lease.renew_at = retry_at
                backoff = min(backoff * 2, 1.0)
                # Logged last: the keeper acts first, whatever a log line costs.
                logger.warning("lease renewal failed; reconnecting", exc_info=True)

    def _renew(self, leases: list[_Lease]) -> None:
        sent = time.monotonic()
        renewed = lease_renew_all([(lease.conversation_id, lease.token) for lease in leases])
        for lease in leases:
            if lease.conversation_id not in renewed:
                lease.lost.set()
                lease.cancel.set()
                logger.warning("lease on %s lost: cancelling its slice", lease.conversation_id)
                continue
            lease.valid_until = sent + settings.CANVAS_LEASE_SECONDS
            lease.renew_at = sent + renew_interval()
            if renewed[lease.conversation_id]:  # interrupted, and the fast path missed it
                lease.cancel.set()

    def _guard_loop(self) -> None:
        while True:
            now = time.monotonic()
            margin = cancel_margin()
            with self._lock:
                leases = list(self.leases.values())
            for lease in leases:
                late = lease.cancel_at is not None and now >= lease.cancel_at
                if late and not lease.cancel.is_set():
                    lease.cancel.set()
                    logger.warning(
                        "slice of %s passed its time limit: cancelling it", lease.conversation_id
                    )
                if now >= lease.valid_until - margin and not lease.cancel.is_set():
                    lease.cancel.set()
                    logger.warning(
                        "lease on %s not renewed in time: cancelling its slice",
                        lease.conversation_id,
                    )
                if now >= lease.valid_until:
                    lease.lost.set()
            pending = [
                min(lease.valid_until - margin, lease.cancel_at or lease.valid_until) - now
                for lease in leases
                if not lease.cancel.is_set()
            ]
            # A cancelled slice still needs its `lost` set when the lease runs out.
            pending += [lease.valid_until - now for lease in leases if not lease.lost.is_set()]
            self._guard_wake.wait(min([*pending, 1.0]) if pending else None)
            self._guard_wake.clear()

    def _watch_loop(self) -> None:
        backoff = 0.1
        while True:
            try:
                client = interrupt_redis(settings.REDIS_URL, health_check_interval=10)
                pubsub = client.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(interrupt_channel())
                backoff = 0.1
                for message in pubsub.listen():
                    self.interrupt(message["data"].decode())
            except (redis.RedisError, OSError):  # the renewals still read the row meanwhile
                logger.warning("interrupt watcher lost Redis; resubscribing", exc_info=True)
                time.sleep(backoff)
                backoff = min(backoff * 2, 5.0)


def lease_renew_all(held: list[tuple[str, str]]) -> dict[str, bool]:
    """Extend every lease in `held` (conversation id, token) whose token still stands, in one
    statement. Returns {conversation id: interrupt requested} for those renewed."""
    _prepare_connection()
    pk = Conversation._meta.pk
    expires = Conversation._meta.get_field("lease_expires_at")
    interrupt = Conversation._meta.get_field("interrupt_requested_at")
    token = Conversation._meta.get_field("lease_token")
    q = connection.ops.quote_name
    values = ", ".join(["(%s, %s)"] * len(held))
    sql = (
        f"UPDATE {q(Conversation._meta.db_table)} SET {q(expires.column)} = %s "
        f"WHERE ({q(pk.column)}, {q(token.column)}) IN (VALUES {values}) "
        f"RETURNING {q(pk.column)}, {q(interrupt.column)}"
    )
    params: list[object] = [
        expires.get_db_prep_value(timezone.now() + _ttl(), connection, prepared=False)
    ]
    for conversation_id, lease_token in held:
        params += [pk.get_db_prep_value(conversation_id, connection, prepared=False), lease_token]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {str(pk.to_python(row[0])): row[1] is not None for row in cursor.fetchall()}


def _ttl():
    from .lease import lease_ttl

    return lease_ttl()


def _prepare_connection() -> None:
    """Name the keeper's connection and bound its statements, each time it is (re)opened."""
    fresh = connection.connection is None
    connection.ensure_connection()
    if fresh and connection.vendor == "postgresql":
        timeout_ms = int(1000 * min(2.0, settings.CANVAS_LEASE_SECONDS / 6))
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('application_name', %s, false), "
                "set_config('statement_timeout', %s, false)",
                [APPLICATION_NAME, f"{max(timeout_ms, 100)}ms"],
            )


def _close_quietly() -> None:
    with contextlib.suppress(DatabaseError, InterfaceError):
        connection.close()


_keeper: LeaseKeeper | None = None
_keeper_pid: int | None = None
_keeper_lock = threading.Lock()


def lease_keeper() -> LeaseKeeper:
    """This process's keeper; a forked child (prefork pool) gets its own."""
    global _keeper, _keeper_pid
    with _keeper_lock:
        if _keeper is None or _keeper_pid != os.getpid():
            _keeper, _keeper_pid = LeaseKeeper(), os.getpid()
        return _keeper


def interrupt_local(conversation_id: str) -> None:
    """Deliver an Interrupt to this process's slices (the embedded mode's fast path)."""
    if _keeper is not None and _keeper_pid == os.getpid():
        _keeper.interrupt(conversation_id)


class Heartbeat:
    """Holds a slice's lease for the `with` block: see the module docstring."""

    def __init__(
        self, conversation_id: str, token: str, *, limits: tuple[float, float] | None = None
    ) -> None:
        """`limits`: (soft, hard) seconds for this slice (see the module docstring)."""
        self.conversation_id = conversation_id
        self.token = token
        self.limits = limits
        self._keeper = lease_keeper()
        self._lease: _Lease | None = None
        self.cancel = threading.Event()
        self.lost = threading.Event()

    def __enter__(self) -> Heartbeat:
        self._lease = self._keeper.hold(self.conversation_id, self.token, self.limits)
        self.cancel, self.lost = self._lease.cancel, self._lease.lost
        return self

    def __exit__(self, *exc: object) -> None:
        if self._lease is not None:
            self._keeper.drop(self._lease)
