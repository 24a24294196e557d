"""What `make up` does before serving, in the server's own process: apply migrations only
when some are pending, and make sure the demo login exists.

Each was a `manage.py` run of its own (a Django start-up each, and a migrate that checks
every app even when nothing is pending); a restart now goes straight to serving. It does not
even import the migrations (a third of a second) when every migration file is recorded as
applied.
"""

from __future__ import annotations

import pkgutil
from importlib.util import find_spec
from typing import TextIO

from django.apps import apps
from django.core.management import call_command
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder


def pending_migrations(database: str = DEFAULT_DB_ALIAS) -> list[str]:
    """The migrations `migrate` would apply, as "app.name", in order."""
    executor = MigrationExecutor(connections[database])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [f"{migration.app_label}.{migration.name}" for migration, _ in plan]


def _migration_files() -> set[tuple[str, str]]:
    """(app label, migration name) of every migration module on disk, found without importing
    one (MigrationLoader imports them all)."""
    found: set[tuple[str, str]] = set()
    for config in apps.get_app_configs():
        spec = find_spec(f"{config.name}.migrations")
        if spec is None or not spec.submodule_search_locations:
            continue
        for module in pkgutil.iter_modules(spec.submodule_search_locations):
            if not module.ispkg and module.name[0] not in "_~":
                found.add((config.label, module.name))
    return found


def all_recorded(database: str = DEFAULT_DB_ALIAS) -> bool:
    """Whether every migration file is recorded as applied: then nothing is pending. (False
    only means "ask the loader": a squashed migration's own name, say, is recorded late.)"""
    recorder = MigrationRecorder(connections[database])
    if not recorder.has_table():
        return False
    return _migration_files() <= set(recorder.applied_migrations())


def prepare(stdout: TextIO) -> None:
    pending = [] if all_recorded() else pending_migrations()
    if pending:
        stdout.write(f"Applying {len(pending)} migration(s)…\n")
        call_command("migrate", interactive=False, verbosity=0, stdout=stdout)
    call_command("ensure_demo_user", stdout=stdout)
