"""The audit log is append-only in the database, like the event log."""

from django.db import migrations

POSTGRES_UP = """
CREATE OR REPLACE FUNCTION teams_audit_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit records are append-only (% refused)', TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER teams_audit_no_change
    BEFORE UPDATE OR DELETE ON teams_auditrecord
    FOR EACH ROW EXECUTE FUNCTION teams_audit_append_only();
"""
POSTGRES_DOWN = """
DROP TRIGGER IF EXISTS teams_audit_no_change ON teams_auditrecord;
DROP FUNCTION IF EXISTS teams_audit_append_only();
"""
SQLITE_UP = [
    """CREATE TRIGGER teams_audit_no_update BEFORE UPDATE ON teams_auditrecord
       BEGIN SELECT RAISE(ABORT, 'audit records are append-only (UPDATE refused)'); END""",
    """CREATE TRIGGER teams_audit_no_delete BEFORE DELETE ON teams_auditrecord
       BEGIN SELECT RAISE(ABORT, 'audit records are append-only (DELETE refused)'); END""",
]
SQLITE_DOWN = ["DROP TRIGGER IF EXISTS teams_audit_no_update", "DROP TRIGGER IF EXISTS teams_audit_no_delete"]


def _run(statements_by_vendor):
    def apply(apps, schema_editor):
        statements = statements_by_vendor.get(schema_editor.connection.vendor, [])
        if isinstance(statements, str):
            statements = [statements]
        for sql in statements:
            schema_editor.execute(sql, params=None)

    return apply


class Migration(migrations.Migration):
    dependencies = [("teams", "0002_teams_memberships_audit")]

    operations = [
        migrations.RunPython(
            _run({"postgresql": POSTGRES_UP, "sqlite": SQLITE_UP}),
            _run({"postgresql": POSTGRES_DOWN, "sqlite": SQLITE_DOWN}),
        )
    ]
