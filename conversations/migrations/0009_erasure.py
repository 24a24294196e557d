"""Conversations can be deleted: the event log's triggers let a conversation's events go only
while an Erasure row names it (inserted and removed by the deleting transaction). UPDATE stays
refused, and so does any other DELETE."""

from django.db import migrations, models

EVENTS = "conversations_conversationevent"
ERASURES = "conversations_erasure"
REFUSED = "conversation events are append-only"

ERASABLE = {
    "postgresql": [
        f"""CREATE OR REPLACE FUNCTION {EVENTS}_append_only() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' AND EXISTS (
        SELECT 1 FROM {ERASURES} WHERE conversation_id = OLD.conversation_id
    ) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION '{REFUSED} (% refused)', TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql""",
    ],
    "sqlite": [
        f"DROP TRIGGER IF EXISTS {EVENTS}_no_delete",
        f"""CREATE TRIGGER {EVENTS}_no_delete BEFORE DELETE ON {EVENTS}
       WHEN NOT EXISTS (SELECT 1 FROM {ERASURES} WHERE conversation_id = OLD.conversation_id)
       BEGIN SELECT RAISE(ABORT, '{REFUSED} (DELETE refused)'); END""",
    ],
}


def _run(statements):
    def run(apps, schema_editor) -> None:
        for sql in statements.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql, params=None)

    return run


STRICT = {  # what migration 0002 installed: every DELETE refused
    "postgresql": [
        f"""CREATE OR REPLACE FUNCTION {EVENTS}_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '{REFUSED} (% refused)', TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql""",
    ],
    "sqlite": [
        f"DROP TRIGGER IF EXISTS {EVENTS}_no_delete",
        f"""CREATE TRIGGER {EVENTS}_no_delete BEFORE DELETE ON {EVENTS}
       BEGIN SELECT RAISE(ABORT, '{REFUSED} (DELETE refused)'); END""",
    ],
}


class Migration(migrations.Migration):
    dependencies = [("conversations", "0008_conversation_archived_at")]

    operations = [
        migrations.CreateModel(
            name="Erasure",
            fields=[("conversation_id", models.UUIDField(primary_key=True, serialize=False))],
        ),
        migrations.RunPython(_run(ERASABLE), _run(STRICT)),
    ]
