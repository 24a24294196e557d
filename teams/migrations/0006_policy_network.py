from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("teams", "0005_hooks_and_notifications"),
    ]

    operations = [
        migrations.AddField(
            model_name="policy",
            name="network",
            field=models.CharField(
                choices=[
                    ("none", "No network"),
                    ("host", "The host's network (its loopback services included)"),
                ],
                default="none",
                help_text="Network for sandboxed commands; host needs CANVAS_SANDBOX_ALLOW_HOST_NETWORK.",
                max_length=8,
            ),
        ),
    ]
