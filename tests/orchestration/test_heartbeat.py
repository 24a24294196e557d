"""The lease heartbeat under database faults, and what it costs: slices driven in threads of
this process, as a threads-pool worker runs them, on the real test Postgres."""

import threading
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.utils import timezone

from conversations import store
from conversations.models import Conversation
from orchestration import services
from orchestration.chain.heartbeat import APPLICATION_NAME, Heartbeat
from orchestration.chain.interrupts import interrupt_publish
from orchestration.chain.slices import run_slice
from tests.conftest import wait_for
from tests.runs import drive, script

pytestmark = pytest.mark.django_db(transaction=True)


def start(*turns) -> Conversation:
    return services.conversation_create(owner=None, model="scripted", prompt=script(*turns))


def terminal(command: str) -> dict:
    return {"tool": "terminal", "args": {"command": command}}


def workspace(conversation) -> Path:
    return Path(Conversation.objects.get(pk=conversation.pk).workspace_path)


def read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def row(conversation) -> Conversation:
    return Conversation.objects.get(pk=conversation.pk)


def keeper_backends() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = %s",
            [APPLICATION_NAME],
        )
        return [pid for (pid,) in cursor.fetchall()]


def other_backends() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def slice_thread(slice_args) -> threading.Thread:
    """A slice run as a threads-pool worker runs it, closing its connection at the end."""

    def run() -> None:
        try:
            run_slice(*slice_args)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def results(conversation) -> list:
    return [s.event for s in store.load(conversation.pk) if s.event.type == "tool.result"]


def test_the_heartbeat_reconnects_after_its_backend_is_terminated(dispatched, settings):
    settings.CANVAS_LEASE_SECONDS = 4  # slack for a loaded machine: renewals every 1.3 s
    conversation = start(terminal("echo start >> side; sleep 6; echo end >> side"), {"say": "done"})
    side = workspace(conversation) / "side"
    runner = slice_thread(dispatched.pop())
    wait_for(lambda: read(side), 30, 0.02, message="the command to run")
    (pid,) = wait_for(keeper_backends, 10, 0.02, message="the heartbeat's first renewal")
    renewed_until = row(conversation).lease_expires_at
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])

    def renewed_on_a_new_connection() -> bool:
        return row(conversation).lease_expires_at > renewed_until and pid not in keeper_backends()

    wait_for(renewed_on_a_new_connection, 4, 0.02, message="a renewal after the reconnect")
    assert read(side) == "start\n"  # the command still runs, and its lease is alive
    runner.join(15)
    assert read(side) == "start\nend\n"
    (result,) = results(conversation)
    assert result.exit_code == 0 and not result.interrupted
    drive(dispatched)
    assert row(conversation).status == "finished"


def test_a_command_is_killed_before_a_lease_it_cannot_renew_runs_out(dispatched, settings):
    """The database refuses the renewal (the row stays locked) for longer than the lease."""
    settings.CANVAS_LEASE_SECONDS = 2
    ticking = "for i in $(seq 200); do date +%s.%N >> ticks; sleep 0.05; done"
    conversation = start(terminal(f"echo start >> side; {ticking}; echo end >> side"))
    ticks, side = workspace(conversation) / "ticks", workspace(conversation) / "side"
    runner = slice_thread(dispatched.pop())
    wait_for(lambda: read(ticks), 30, 0.02, message="the command to run")
    locked, unlock = threading.Event(), threading.Event()

    def lock_the_row() -> None:
        with transaction.atomic():
            Conversation.objects.select_for_update().get(pk=conversation.pk)
            locked.set()
            unlock.wait(30)
        connection.close()

    locker = threading.Thread(target=lock_the_row)
    locker.start()
    assert locked.wait(5)
    expires = row(conversation).lease_expires_at  # nobody can renew it now
    try:
        wait_for(lambda: timezone.now() > expires + timedelta(seconds=0.5), 10, 0.05,
                 message="the lease to run out")  # fmt: skip
    finally:
        unlock.set()
        locker.join(10)
    runner.join(15)
    last_tick = datetime.fromtimestamp(float(read(ticks).split()[-1]), tz=expires.tzinfo)
    assert last_tick < expires, f"the command ran {last_tick - expires} past its lease"
    assert read(side) == "start\n"
    (result,) = results(conversation)
    assert result.interrupted


def test_an_interrupt_on_the_row_alone_stops_the_command_at_the_next_renewal(dispatched, settings):
    """The fast path (Redis) can lose a message; the row is the truth the renewal reads."""
    settings.CANVAS_LEASE_SECONDS = 2
    conversation = start(terminal("echo start >> side; sleep 20; echo end >> side"))
    side = workspace(conversation) / "side"
    runner = slice_thread(dispatched.pop())
    wait_for(lambda: read(side), 30, 0.02, message="the command to run")
    Conversation.objects.filter(pk=conversation.pk).update(interrupt_requested_at=timezone.now())
    runner.join(2.0)
    assert not runner.is_alive(), "the command outlived the next renewal"
    assert results(conversation)[0].interrupted


def test_one_database_connection_per_slice_and_one_per_process(dispatched, settings):
    settings.CANVAS_LEASE_SECONDS = 2
    slices = 8
    conversations = [start(terminal("echo start >> side; sleep 3")) for _ in range(slices)]
    # Connections other tests' threads still hold are not this test's to count.
    before = other_backends()
    runners = [slice_thread(dispatched.pop()) for _ in conversations]
    try:
        wait_for(
            lambda: all(read(workspace(c) / "side") for c in conversations) and keeper_backends(),
            60, 0.02, message="every command running and a renewal made",
        )  # fmt: skip
        held = other_backends() - before
    finally:
        for runner in runners:
            runner.join(30)
    assert held <= slices + 1, f"{held} connections for {slices} running slices"


def test_the_embedded_mode_delivers_an_interrupt_in_process(settings):
    settings.REDIS_URL = ""  # the worker shares the web process: no broker in between
    conversation_id = str(uuid.uuid4())
    with Heartbeat(conversation_id, uuid.uuid4().hex) as heartbeat:
        interrupt_publish(conversation_id)
        assert heartbeat.cancel.is_set()
