"""Writes under a held lease survive a dropped database connection (issue 25 item 3): retried
on a fresh connection, never twice, never without the lease, and not for longer than the
budget. Real Postgres; connections dropped with pg_terminate_backend or refused by a port
nothing listens on."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path

import pytest
from django.db import OperationalError, connection

from conversations import store
from conversations.events import AgentErrorEvent
from conversations.models import Conversation
from orchestration import services
from orchestration.chain.lease import lease_claim
from orchestration.chain.lease_writes import lease_append, retry_budget
from orchestration.chain.slices import run_slice
from teams.budget import spend_add, spend_this_month
from tests.conftest import wait_for
from tests.faults.services import free_port
from tests.runs import drive, script

pytestmark = pytest.mark.django_db(transaction=True)


def start(*turns) -> Conversation:
    return services.conversation_create(owner=None, model="scripted", prompt=script(*turns))


def claimed(dispatched) -> tuple[str, str]:
    """The conversation's first slice claimed by this thread: (conversation id, token)."""
    conversation_id, slice_id = dispatched.pop()
    claim = lease_claim(conversation_id, slice_id)
    assert claim.token is not None
    return conversation_id, claim.token


def terminate_other_backends() -> int:
    """What an operator's pg_terminate_backend, or a pooler's restart, does to the workers."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def terminate_own_backend() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")


def errors(conversation_id) -> list[AgentErrorEvent]:
    return [s.event for s in store.load(conversation_id) if s.event.type == "agent.error"]


def assert_seqs_whole(conversation_id) -> None:
    seqs = [s.seq for s in store.load(conversation_id)]
    assert seqs == list(range(1, len(seqs) + 1))


def test_a_command_s_output_is_recorded_once_when_its_connection_dropped_meanwhile(dispatched):
    command = "echo start >> side; while [ ! -e go ]; do sleep 0.02; done; echo real-output-7f3"
    conversation = start({"tool": "terminal", "args": {"command": command}}, {"say": "done"})
    workspace = Path(Conversation.objects.get(pk=conversation.pk).workspace_path)
    conversation_id, slice_id = dispatched.pop()

    def run() -> None:
        try:
            run_slice(conversation_id, slice_id)
        finally:
            connection.close()

    runner = threading.Thread(target=run)
    runner.start()
    # A deadline, not a measure: the session's first model call imports LiteLLM (30 s and
    # more on a loaded machine).
    wait_for(lambda: (workspace / "side").exists(), 120, 0.02, message="the command to start")
    # Between the command's start and its result's append: the slice's connection (and the
    # lease keeper's) dropped, the database itself up.
    assert terminate_other_backends() >= 1
    (workspace / "go").touch()
    runner.join(60)
    assert not runner.is_alive()
    drive(dispatched)
    assert Conversation.objects.get(pk=conversation.pk).status == "finished"
    results = [s.event for s in store.load(conversation.pk) if s.event.type == "tool.result"]
    (result,) = results
    assert not result.interrupted, result.content
    assert "real-output-7f3" in result.content and result.exit_code == 0
    assert_seqs_whole(conversation.pk)


def test_a_batch_whose_commit_answer_was_lost_is_not_appended_twice(dispatched, monkeypatch):
    conversation = start({"say": "hi"})
    conversation_id, token = claimed(dispatched)
    before = len(store.load(conversation_id))
    calls = cut_after_append(monkeypatch)  # autocommit: the append committed, then the cut
    event = AgentErrorEvent(code="note", message="written once")
    stored = lease_append(conversation_id, [event], token=token)
    assert [s.event.id for s in stored] == [event.id]
    assert len(calls) == 1  # the retry found the batch in the log; it did not append again
    assert [e.id for e in errors(conversation_id)] == [event.id]
    assert stored[0].seq == before + 1 == len(store.load(conversation_id))
    assert_seqs_whole(conversation.pk)


def test_a_write_cut_before_its_commit_is_redone_with_its_bill_once(dispatched, monkeypatch):
    start({"say": "hi"})
    conversation_id, token = claimed(dispatched)
    team_id = Conversation.objects.get(pk=conversation_id).team_id
    billed = spend_this_month(team_id)
    calls = cut_after_append(monkeypatch)  # inside the bill's transaction: nothing committed
    event = AgentErrorEvent(code="note", message="billed once")
    lease_append(
        conversation_id, [event], token=token, also=lambda: spend_add(team_id, Decimal("0.25"))
    )
    assert len(calls) == 2
    assert [e.id for e in errors(conversation_id)] == [event.id]
    assert spend_this_month(team_id) == billed + Decimal("0.25")


def cut_after_append(monkeypatch) -> list:
    """store.append whose first call loses its connection right after the statement ran."""
    real_append = store.append
    calls: list = []

    def append(*args, **kwargs):
        stored = real_append(*args, **kwargs)
        calls.append(stored)
        if len(calls) == 1:
            terminate_own_backend()
        return stored

    monkeypatch.setattr(store, "append", append)
    return calls


def test_a_write_whose_connection_dropped_is_appended_on_a_fresh_one(dispatched):
    start({"say": "hi"})
    conversation_id, token = claimed(dispatched)
    terminate_own_backend_from_outside()
    event = AgentErrorEvent(code="note", message="after the drop")
    (stored,) = lease_append(conversation_id, [event], token=token)
    assert stored.event.id == event.id
    assert [e.id for e in errors(conversation_id)] == [event.id]


def terminate_own_backend_from_outside() -> None:
    """Drop this thread's connection the way a restart of its pooler would: the thread learns
    it only at its next query."""
    import psycopg

    from tests.conftest import _database_url

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    url = _database_url().replace(f"/{connection.settings_dict['NAME']}", "/postgres")
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_a_lost_lease_is_given_up_at_once_not_retried(dispatched):
    start({"say": "hi"})
    conversation_id, token = claimed(dispatched)
    Conversation.objects.filter(pk=conversation_id).update(lease_token="another-runner")
    terminate_own_backend_from_outside()
    started = time.monotonic()
    with pytest.raises(store.StaleLeaseError):
        lease_append(conversation_id, [AgentErrorEvent(code="note", message="x")], token=token)
    assert time.monotonic() - started < retry_budget() / 2
    assert errors(conversation_id) == []


@contextmanager
def database_away(monkeypatch) -> Iterator[None]:
    """Every new connection refused: nothing listens on the port the settings name now. A
    pool opened on the real port is replaced by one that gives up on a connection quickly."""
    database = connection.settings_dict
    connection.close()
    monkeypatch.setitem(database, "PORT", str(free_port()))
    options = database.get("OPTIONS", {})
    pooled = "pool" in options
    if pooled:
        monkeypatch.setitem(
            database, "OPTIONS", {**options, "pool": {**options["pool"], "timeout": 0.2}}
        )
        connection.close_pool()
    try:
        yield
    finally:
        connection.close()
        if pooled:
            connection.close_pool()
        monkeypatch.undo()


def test_a_database_that_stays_away_gives_the_write_up_within_the_budget(
    dispatched, settings, monkeypatch, caplog
):
    settings.CANVAS_LEASE_SECONDS = 2
    start({"say": "hi"})
    conversation_id, token = claimed(dispatched)
    event = AgentErrorEvent(code="note", message="x")
    with database_away(monkeypatch), pytest.raises(OperationalError):
        started = time.monotonic()
        try:
            lease_append(conversation_id, [event], token=token)
        finally:
            took = time.monotonic() - started
    retries = [r for r in caplog.records if "retrying on a fresh connection" in r.getMessage()]
    assert len(retries) >= 3  # a few tries, with short pauses
    assert retry_budget() <= took < retry_budget() + 1.0
    assert errors(conversation_id) == []
