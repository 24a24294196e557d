"""What `make up` does before serving, in the server's own process: apply migrations only
when some are pending, and make sure the demo login exists.

Each was a `manage.py` run of its own (a Django start-up each, and a migrate that checks
every app even when nothing is pending); a restart now goes straight to serving.
"""

from __future__ import annotations

from typing import TextIO

from django.core.management import call_command
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor


def pending_migrations(database: str = DEFAULT_DB_ALIAS) -> list[str]:
    """The migrations `migrate` would apply, as "app.name", in order."""
    executor = MigrationExecutor(connections[database])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [f"{migration.app_label}.{migration.name}" for migration, _ in plan]


def prepare(stdout: TextIO) -> None:
    pending = pending_migrations()
    if pending:
        stdout.write(f"Applying {len(pending)} migration(s)…\n")
        call_command("migrate", interactive=False, verbosity=0, stdout=stdout)
    call_command("ensure_demo_user", stdout=stdout)
