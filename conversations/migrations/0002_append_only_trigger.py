"""The event table is append-only in the database itself, not just by convention."""

from django.db import migrations

POSTGRES_UP = """
CREATE OR REPLACE FUNCTION conversations_event_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'conversation events are append-only (% refused)', TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER conversations_event_no_update
    BEFORE UPDATE OR DELETE ON conversations_conversationevent
    FOR EACH ROW EXECUTE FUNCTION conversations_event_append_only();
"""
POSTGRES_DOWN = """
DROP TRIGGER IF EXISTS conversations_event_no_update ON conversations_conversationevent;
DROP FUNCTION IF EXISTS conversations_event_append_only();
"""
SQLITE_UP = [
    """CREATE TRIGGER conversations_event_no_update BEFORE UPDATE ON conversations_conversationevent
       BEGIN SELECT RAISE(ABORT, 'conversation events are append-only (UPDATE refused)'); END""",
    # No reference to another table here: SQLite rebuilds tables on ALTER, and a trigger that
    # names the conversation table would break every later migration of it.
    """CREATE TRIGGER conversations_event_no_delete BEFORE DELETE ON conversations_conversationevent
       BEGIN SELECT RAISE(ABORT, 'conversation events are append-only (DELETE refused)'); END""",
]
SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS conversations_event_no_update",
    "DROP TRIGGER IF EXISTS conversations_event_no_delete",
]


def _run(statements_by_vendor):
    def apply(apps, schema_editor):
        statements = statements_by_vendor.get(schema_editor.connection.vendor, [])
        if isinstance(statements, str):
            statements = [statements]
        for sql in statements:
            schema_editor.execute(sql, params=None)

    return apply


class Migration(migrations.Migration):
    dependencies = [("conversations", "0001_initial")]

    operations = [
        migrations.RunPython(
            _run({"postgresql": POSTGRES_UP, "sqlite": SQLITE_UP}),
            _run({"postgresql": POSTGRES_DOWN, "sqlite": SQLITE_DOWN}),
        )
    ]
