import threading
from decimal import Decimal

import pytest
from django.db import DatabaseError, connection, transaction

from conversations import broadcast, store
from conversations.events import (
    ActionEvent,
    ObservationEvent,
    RunStartedEvent,
    Status,
    StatusChangeEvent,
    Usage,
    UserMessageEvent,
)
from conversations.models import Conversation, ConversationEvent
from tests.factories import make_conversation


@pytest.fixture(autouse=True, params=["one-statement", "portable"])
def append_path(request, settings):
    """Every store test runs through both append paths: Postgres's single statement and the
    portable ORM path SQLite uses."""
    settings.CANVAS_STORE_FAST_PATH = request.param == "one-statement"
    return settings.CANVAS_STORE_FAST_PATH


@pytest.fixture
def conversation(db):
    return make_conversation()


@pytest.fixture
def published(monkeypatch):
    sent = []
    monkeypatch.setattr(
        broadcast, "publish_events", lambda cid, records, status: sent.append(records)
    )
    return sent


def test_append_assigns_consecutive_seqs_and_mirrors_the_log_onto_the_row(conversation):
    first = store.append(conversation.pk, [UserMessageEvent(text="a"), RunStartedEvent()])
    second = store.append(
        conversation.pk,
        [
            StatusChangeEvent(status=Status.RUNNING),
            ActionEvent(
                tool_call_id="c", tool="think", arguments="{}",
                usage=Usage(prompt_tokens=10, completion_tokens=2, cost_usd=0.25),
            ),
        ],
    )  # fmt: skip
    assert [s.seq for s in first + second] == [1, 2, 3, 4]
    conversation.refresh_from_db()
    assert conversation.last_seq == 4
    assert conversation.status == "running"
    assert (conversation.tokens_in, conversation.tokens_out) == (10, 2)
    assert conversation.cost_usd == Decimal("0.25")
    assert (conversation.steps, conversation.run_steps) == (1, 1)
    loaded = store.load(conversation.pk, after_seq=2, limit=1)
    assert [(s.seq, s.event.type) for s in loaded] == [(3, "status.changed")]


@pytest.mark.django_db(transaction=True)
def test_concurrent_appenders_get_gap_free_unique_seqs():
    conversation = make_conversation()
    threads, per_thread, errors = 8, 40, []

    def appender(n: int) -> None:
        try:
            for i in range(per_thread):
                store.append(conversation.pk, [UserMessageEvent(text=f"{n}-{i}")])
        except Exception as exc:  # surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    workers = [threading.Thread(target=appender, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    seqs = list(
        ConversationEvent.objects.filter(conversation=conversation)
        .order_by("seq")
        .values_list("seq", flat=True)
    )
    assert seqs == list(range(1, threads * per_thread + 1))
    texts = {s.event.text for s in store.load(conversation.pk)}
    assert len(texts) == threads * per_thread
    conversation.refresh_from_db()
    assert conversation.last_seq == threads * per_thread


@pytest.mark.skipif(connection.vendor != "postgresql", reason="trigger test for Postgres")
def test_database_refuses_update_and_delete_of_events(conversation):
    store.append(conversation.pk, [UserMessageEvent(text="keep me")])
    for sql in (
        "UPDATE conversations_conversationevent SET type = 'x'",
        "DELETE FROM conversations_conversationevent",
    ):
        with (
            pytest.raises(DatabaseError, match="append-only"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(sql)
    assert store.load(conversation.pk)[0].event.text == "keep me"


@pytest.mark.django_db(transaction=True)
def test_publishes_only_after_commit(published):
    conversation = make_conversation()
    with transaction.atomic():
        store.append(conversation.pk, [UserMessageEvent(text="a")])
        assert published == []  # nothing leaves before the commit
    assert [r["seq"] for r in published[0]] == [1]

    with pytest.raises(RuntimeError), transaction.atomic():
        store.append(conversation.pk, [UserMessageEvent(text="rolled back")])
        raise RuntimeError("abort")
    assert len(published) == 1
    assert [s.event.text for s in store.load(conversation.pk)] == ["a"]
    conversation.refresh_from_db()
    assert conversation.last_seq == 1


@pytest.mark.django_db(transaction=True)
def test_an_append_outside_a_transaction_is_committed_and_published_at_once(published):
    conversation = make_conversation()
    assert not connection.in_atomic_block
    store.append(conversation.pk, [UserMessageEvent(text="alone")])
    assert [r["seq"] for r in published[0]] == [1]
    seen: list[int] = []

    def other_connection() -> None:  # a committed row is visible to everyone else
        try:
            seen.extend(
                ConversationEvent.objects.filter(conversation=conversation).values_list(
                    "seq", flat=True
                )
            )
        finally:
            connection.close()

    reader = threading.Thread(target=other_connection)
    reader.start()
    reader.join()
    assert seen == [1]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements are Postgres")
@pytest.mark.django_db(transaction=True)
def test_postgres_appends_run_as_a_prepared_statement(append_path):
    conversation = make_conversation()
    for i in range(3):
        store.append(conversation.pk, [UserMessageEvent(text=f"m{i}")])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements"
            " WHERE statement LIKE '%%INSERT INTO conversations_conversationevent%%'"
        )
        (prepared,) = cursor.fetchone()
    assert prepared == (1 if append_path else 0)


def test_append_with_a_stale_lease_writes_nothing(conversation):
    Conversation.objects.filter(pk=conversation.pk).update(lease_token="current")
    with pytest.raises(store.StaleLeaseError):
        store.append(
            conversation.pk,
            [ObservationEvent(tool_call_id="c", tool="t", content="late")],
            lease_token="old",
        )
    assert store.load(conversation.pk) == []
    assert store.append(conversation.pk, [UserMessageEvent(text="ok")], lease_token="current")


@pytest.mark.django_db(transaction=True)
def test_a_secret_added_by_another_process_is_redacted_on_the_very_next_append(user):
    """The one-statement path caches the team's secrets version; the statement itself
    refuses a stale guess, so the cache can never let a new secret through."""
    from teams.secrets import secret_create
    from teams.services import team_default_for

    conversation = make_conversation(user)
    store.append(conversation.pk, [UserMessageEvent(text="warm the cache")])
    secret_create(by=user, team=team_default_for(user), name="FRESH", value="fresh-value-123")
    (stored,) = store.append(conversation.pk, [UserMessageEvent(text="see fresh-value-123")])
    assert stored.event.text == "see <secret:FRESH>"
    assert "fresh-value-123" not in str(
        ConversationEvent.objects.filter(conversation=conversation).values_list(
            "payload", flat=True
        )
    )


def test_appending_to_a_missing_conversation_fails_cleanly(db):
    import uuid

    with pytest.raises(Conversation.DoesNotExist):
        store.append(uuid.uuid4(), [UserMessageEvent(text="nowhere")])


@pytest.mark.skipif(connection.vendor != "postgresql", reason="trigger test for Postgres")
def test_database_refuses_rewriting_the_audit_log(user):
    from teams.models import AuditRecord

    assert AuditRecord.objects.exists()
    for sql in ("UPDATE teams_auditrecord SET kind = 'x'", "DELETE FROM teams_auditrecord"):
        with (
            pytest.raises(DatabaseError, match="append-only"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(sql)
