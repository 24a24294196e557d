"""Conversations can be deleted: the event log's triggers let a conversation's events go only
while an Erasure row names it (inserted and removed by the deleting transaction). UPDATE stays
refused, and so does any other DELETE. Reversed, every DELETE is refused again (as 0002 had it)."""

from django.db import migrations, models

EVENTS = "conversations_conversationevent"
ERASURES = "conversations_erasure"
REFUSED = "conversation events are append-only"
ERASING = f"EXISTS (SELECT 1 FROM {ERASURES} WHERE conversation_id = OLD.conversation_id)"


def _statements(vendor: str, *, erasable: bool) -> list[str]:
    if vendor == "postgresql":
        allow = f"IF TG_OP = 'DELETE' AND {ERASING} THEN RETURN OLD; END IF;" if erasable else ""
        return [
            f"""CREATE OR REPLACE FUNCTION {EVENTS}_append_only() RETURNS trigger AS $$
BEGIN
    {allow}
    RAISE EXCEPTION '{REFUSED} (% refused)', TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql"""
        ]
    if vendor == "sqlite":
        when = f"WHEN NOT {ERASING}" if erasable else ""
        return [
            f"DROP TRIGGER IF EXISTS {EVENTS}_no_delete",
            f"""CREATE TRIGGER {EVENTS}_no_delete BEFORE DELETE ON {EVENTS} {when}
       BEGIN SELECT RAISE(ABORT, '{REFUSED} (DELETE refused)'); END""",
        ]
    return []


def _run(*, erasable: bool):
    def run(apps, schema_editor) -> None:
        for sql in _statements(schema_editor.connection.vendor, erasable=erasable):
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [("conversations", "0008_conversation_archived_at")]

    operations = [
        migrations.CreateModel(
            name="Erasure",
            fields=[("conversation_id", models.UUIDField(primary_key=True, serialize=False))],
        ),
        migrations.RunPython(_run(erasable=True), _run(erasable=False)),
    ]
