"""The audit log is append-only in the database, like the event log."""

from django.db import migrations

from common.append_only import append_only


class Migration(migrations.Migration):
    dependencies = [("teams", "0002_teams_memberships_audit")]

    operations = [append_only("teams_auditrecord", "audit records")]
