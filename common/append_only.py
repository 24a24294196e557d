"""Database triggers that make a table append-only, for migrations.

Used by the event log and the audit log: the database itself refuses UPDATE and DELETE, so no
code path (a shell, an admin action, a bug) can rewrite history. Migrations import this
module, so its output for a given table must never change.
"""

from __future__ import annotations

from django.db import migrations


def _statements(table: str, what: str) -> dict[str, list[str]]:
    function = f"{table}_append_only"
    return {
        "postgresql": [
            f"""CREATE OR REPLACE FUNCTION {function}() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '{what} are append-only (% refused)', TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql""",
            f"""CREATE TRIGGER {table}_no_change BEFORE UPDATE OR DELETE ON {table}
    FOR EACH ROW EXECUTE FUNCTION {function}()""",
        ],
        # No reference to other tables: SQLite rebuilds tables on ALTER, and a trigger that
        # named one would break later migrations of it.
        "sqlite": [
            f"""CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table}
       BEGIN SELECT RAISE(ABORT, '{what} are append-only (UPDATE refused)'); END""",
            f"""CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table}
       BEGIN SELECT RAISE(ABORT, '{what} are append-only (DELETE refused)'); END""",
        ],
    }


def _drops(table: str) -> dict[str, list[str]]:
    return {
        "postgresql": [
            f"DROP TRIGGER IF EXISTS {table}_no_change ON {table}",
            f"DROP FUNCTION IF EXISTS {table}_append_only()",
        ],
        "sqlite": [
            f"DROP TRIGGER IF EXISTS {table}_no_update",
            f"DROP TRIGGER IF EXISTS {table}_no_delete",
        ],
    }


def _runner(by_vendor: dict[str, list[str]]):
    def run(apps, schema_editor) -> None:
        for sql in by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql, params=None)

    return run


def append_only(table: str, what: str) -> migrations.RunPython:
    """The migration operation installing (and on reverse, removing) the triggers."""
    return migrations.RunPython(_runner(_statements(table, what)), _runner(_drops(table)))
