"""The conversations app's schema as it stood after 0009_erasure, in one migration.

A database that applied 0001-0009 counts this one as applied (`replaces`); a new one runs it.
The event log is append-only in the database itself (common.append_only), except that a
conversation's events may go while an Erasure row names it (inserted and removed by the
deleting transaction); UPDATE stays refused, and so does any other DELETE.
"""

import django.db.models.deletion
import uuid
from django.conf import settings
from django.db import migrations, models

from common.append_only import append_only

EVENTS = "conversations_conversationevent"
ERASURES = "conversations_erasure"
REFUSED = "conversation events are append-only"


def _delete_guard(*, erasable: bool) -> dict[str, list[str]]:
    """The event table's DELETE guard: strict (every DELETE refused, as common.append_only
    installs it) or erasable (a DELETE passes while an Erasure row names the conversation)."""
    unless_erased = (
        f"""    IF TG_OP = 'DELETE' AND EXISTS (
        SELECT 1 FROM {ERASURES} WHERE conversation_id = OLD.conversation_id
    ) THEN
        RETURN OLD;
    END IF;
"""
        if erasable
        else ""
    )
    when = (
        f"""
       WHEN NOT EXISTS (SELECT 1 FROM {ERASURES} WHERE conversation_id = OLD.conversation_id)"""
        if erasable
        else ""
    )
    return {
        "postgresql": [
            f"""CREATE OR REPLACE FUNCTION {EVENTS}_append_only() RETURNS trigger AS $$
BEGIN
{unless_erased}    RAISE EXCEPTION '{REFUSED} (% refused)', TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql""",
        ],
        "sqlite": [
            f"DROP TRIGGER IF EXISTS {EVENTS}_no_delete",
            f"""CREATE TRIGGER {EVENTS}_no_delete BEFORE DELETE ON {EVENTS}{when}
       BEGIN SELECT RAISE(ABORT, '{REFUSED} (DELETE refused)'); END""",
        ],
    }


def _run(statements: dict[str, list[str]]):
    def run(apps, schema_editor) -> None:
        for sql in statements.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):

    initial = True

    replaces = [
        ("conversations", "0001_initial"),
        ("conversations", "0002_append_only_trigger"),
        ("conversations", "0003_worker_host"),
        ("conversations", "0004_conversation_team"),
        ("conversations", "0005_interrupt"),
        ("conversations", "0006_run_slice_due_at"),
        ("conversations", "0007_unclaimed_due_partial_index"),
        ("conversations", "0008_conversation_archived_at"),
        ("conversations", "0009_erasure"),
    ]

    dependencies = [
        ('teams', '0001_squashed'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Erasure',
            fields=[
                ('conversation_id', models.UUIDField(primary_key=True, serialize=False)),
            ],
        ),
        migrations.CreateModel(
            name='Conversation',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('title', models.CharField(blank=True, max_length=200)),
                ('archived_at', models.DateTimeField(blank=True, help_text="Archived: out of the team's sidebar, kept whole.", null=True)),
                ('status', models.CharField(choices=[('idle', 'Idle'), ('running', 'Running'), ('paused', 'Paused'), ('waiting_for_confirmation', 'Waiting For Confirmation'), ('waiting_for_subagents', 'Waiting For Subagents'), ('finished', 'Finished'), ('stuck', 'Stuck'), ('error', 'Error')], default='idle', max_length=32)),
                ('model', models.CharField(help_text='Model profile name.', max_length=200)),
                ('workspace_path', models.CharField(max_length=1000)),
                ('agent_config', models.JSONField(blank=True, default=dict)),
                ('tokens_in', models.BigIntegerField(default=0)),
                ('tokens_out', models.BigIntegerField(default=0)),
                ('cost_usd', models.DecimalField(decimal_places=6, default=0, max_digits=14)),
                ('steps', models.IntegerField(default=0)),
                ('run_steps', models.IntegerField(default=0, help_text='LLM steps since the current run began.')),
                ('last_seq', models.BigIntegerField(default=0)),
                ('run_slice', models.CharField(blank=True, help_text='Id of the one task slice allowed to run next; other deliveries are no-ops.', max_length=64, null=True)),
                ('lease_token', models.CharField(blank=True, max_length=64, null=True)),
                ('interrupt_requested_at', models.DateTimeField(blank=True, help_text='Set by Interrupt; the runner stops what is in flight.', null=True)),
                ('worker_host', models.CharField(blank=True, default='', help_text="Host holding the local workspace; its queue gets the conversation's slices.", max_length=255)),
                ('lease_expires_at', models.DateTimeField(blank=True, null=True)),
                ('run_slice_due_at', models.DateTimeField(blank=True, help_text='When `run_slice` should have been claimed; the sweeper re-sends it after.', null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('owner', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='conversations', to=settings.AUTH_USER_MODEL)),
                ('team', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='conversations', to='teams.team')),
            ],
            options={
                'ordering': ['-created_at'],
            },
        ),
        migrations.CreateModel(
            name='ConversationEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('seq', models.BigIntegerField()),
                ('type', models.CharField(max_length=64)),
                ('schema_version', models.PositiveSmallIntegerField(default=1)),
                ('payload', models.JSONField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('conversation', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='events', to='conversations.conversation')),
            ],
            options={
                'ordering': ['conversation', 'seq'],
            },
        ),
        migrations.AddIndex(
            model_name='conversation',
            index=models.Index(fields=['status', 'lease_expires_at'], name='conversatio_status_ea7574_idx'),
        ),
        migrations.AddIndex(
            model_name='conversation',
            index=models.Index(condition=models.Q(('lease_token__isnull', True), ('status', 'running')), fields=['run_slice_due_at'], name='conversation_unclaimed_due'),
        ),
        migrations.AddConstraint(
            model_name='conversationevent',
            constraint=models.UniqueConstraint(fields=('conversation', 'seq'), name='event_unique_seq'),
        ),
        append_only(EVENTS, "conversation events"),
        # Replaces the function append_only just made (0009 did the same after 0002).
        migrations.RunPython(
            _run(_delete_guard(erasable=True)), _run(_delete_guard(erasable=False))
        ),
    ]
