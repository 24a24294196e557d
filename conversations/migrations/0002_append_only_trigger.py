"""The event table is append-only in the database itself, not just by convention."""

from django.db import migrations

from common.append_only import append_only


class Migration(migrations.Migration):
    dependencies = [("conversations", "0001_initial")]

    operations = [append_only("conversations_conversationevent", "conversation events")]
