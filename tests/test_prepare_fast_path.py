"""A second `make up` does not import every migration to learn that none is pending
(canvas.startup.all_recorded); a migration file not recorded as applied sends it to the loader."""

from django.db.migrations.recorder import MigrationRecorder

from canvas.startup import all_recorded, pending_migrations


def test_a_migrated_database_needs_no_loader(db):
    assert all_recorded()
    assert pending_migrations() == []


def test_a_migration_not_recorded_is_left_to_the_loader(db):
    recorded = MigrationRecorder.Migration.objects.exclude(name__contains="squashed")
    latest = recorded.latest("id")  # a leaf, replaced by no squash
    latest.delete()
    assert not all_recorded()
    assert pending_migrations() == [f"{latest.app}.{latest.name}"]
