"""The teams app's schema as it stood after 0007_team_invitations, in one migration.

A database that applied 0001-0007 counts this one as applied (`replaces`); a new one runs it.
The audit log is append-only in the database itself (common.append_only).
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from common.append_only import append_only


class Migration(migrations.Migration):

    initial = True

    replaces = [
        ("teams", "0001_initial"),
        ("teams", "0002_teams_memberships_audit"),
        ("teams", "0003_audit_append_only"),
        ("teams", "0004_secrets_policies_profiles"),
        ("teams", "0005_hooks_and_notifications"),
        ("teams", "0006_policy_network"),
        ("teams", "0007_team_invitations"),
    ]

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Team',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=100, unique=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('secrets_version', models.PositiveIntegerField(default=0, help_text='Bumped on every secret change so caches of values can tell.')),
            ],
            options={
                'ordering': ['name'],
            },
        ),
        migrations.CreateModel(
            name='ApiToken',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=100)),
                ('prefix', models.CharField(help_text='Shown in lists to tell tokens apart.', max_length=16)),
                ('key_hash', models.CharField(max_length=64, unique=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('last_used_at', models.DateTimeField(blank=True, null=True)),
                ('expires_at', models.DateTimeField(blank=True, null=True)),
                ('revoked_at', models.DateTimeField(blank=True, null=True)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-created_at'],
            },
        ),
        migrations.CreateModel(
            name='AuditRecord',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('actor_name', models.CharField(blank=True, max_length=150)),
                ('kind', models.CharField(db_index=True, max_length=64)),
                ('target', models.CharField(blank=True, max_length=255)),
                ('data', models.JSONField(blank=True, default=dict)),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('actor', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('team', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='audit_records', to='teams.team')),
            ],
            options={
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='TeamNotification',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('webhook_url', models.URLField(max_length=500)),
                ('webhook_secret', models.TextField(help_text='The signing secret, Fernet-encrypted.')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('team', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='notification', to='teams.team')),
                ('updated_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.CreateModel(
            name='Secret',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(help_text='An environment-variable name: API_KEY.', max_length=64)),
                ('description', models.CharField(blank=True, max_length=500)),
                ('ciphertext', models.TextField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('updated_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('team', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='secrets', to='teams.team')),
            ],
            options={
                'ordering': ['name'],
                'constraints': [models.UniqueConstraint(fields=('team', 'name'), name='secret_unique')],
            },
        ),
        migrations.CreateModel(
            name='Policy',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('confirmation_mode', models.CharField(choices=[('always', 'Always confirm'), ('never', 'Never confirm'), ('risky', 'Confirm risky actions')], default='risky', max_length=16)),
                ('risk_threshold', models.CharField(choices=[('LOW', 'Low'), ('MEDIUM', 'Medium'), ('HIGH', 'High')], default='HIGH', max_length=8)),
                ('allowed_tools', models.JSONField(blank=True, default=list, help_text='Tool names; empty allows every tool.')),
                ('allowed_agent_kinds', models.JSONField(blank=True, default=list, help_text='Agent kinds (native, acp:NAME); empty allows all.')),
                ('max_iterations_per_run', models.PositiveIntegerField(blank=True, null=True)),
                ('max_cost_per_run_usd', models.DecimalField(blank=True, decimal_places=4, max_digits=12, null=True)),
                ('max_cost_per_month_usd', models.DecimalField(blank=True, decimal_places=4, max_digits=12, null=True)),
                ('max_concurrent_runs', models.PositiveIntegerField(blank=True, null=True)),
                ('network', models.CharField(choices=[('none', 'No network'), ('host', "The host's network (its loopback services included)")], default='none', help_text='Network for sandboxed commands; host needs CANVAS_SANDBOX_ALLOW_HOST_NETWORK.', max_length=8)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('updated_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('team', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='policy', to='teams.team')),
            ],
            options={
                'verbose_name_plural': 'policies',
                'constraints': [models.UniqueConstraint(condition=models.Q(('team__isnull', True)), fields=('team',), name='one_site_policy')],
            },
        ),
        migrations.CreateModel(
            name='ModelProfile',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=100)),
                ('model', models.CharField(help_text='LiteLLM model id, e.g. openai/gpt-4o.', max_length=200)),
                ('api_base', models.URLField(blank=True)),
                ('api_key_secret', models.CharField(blank=True, help_text='Name of the team secret holding the API key.', max_length=64)),
                ('max_input_tokens', models.PositiveIntegerField(blank=True, null=True)),
                ('temperature', models.FloatField(blank=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('team', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='model_profiles', to='teams.team')),
            ],
            options={
                'ordering': ['name'],
                'constraints': [models.UniqueConstraint(fields=('team', 'name'), name='model_profile_unique')],
            },
        ),
        migrations.CreateModel(
            name='Membership',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('role', models.CharField(choices=[('owner', 'Owner'), ('admin', 'Admin'), ('member', 'Member'), ('viewer', 'Viewer')], default='member', max_length=16)),
                ('is_default', models.BooleanField(default=False, help_text='The team used when a request names none.')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to=settings.AUTH_USER_MODEL)),
                ('team', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to='teams.team')),
            ],
            options={
                'ordering': ['team__name'],
                'constraints': [models.UniqueConstraint(fields=('team', 'user'), name='membership_unique')],
            },
        ),
        migrations.CreateModel(
            name='Hook',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=64)),
                ('event', models.CharField(choices=[('PreToolUse', 'Before a tool runs'), ('PostToolUse', 'After a tool ran'), ('UserPromptSubmit', 'When a message is sent'), ('Stop', 'When the agent wants to finish')], max_length=32)),
                ('matcher', models.CharField(blank=True, help_text='Regular expression on the tool name; blank: all.', max_length=500)),
                ('command', models.TextField(help_text='Run with bash; gets the event as JSON on stdin.')),
                ('timeout_seconds', models.PositiveSmallIntegerField(default=10)),
                ('fail_closed', models.BooleanField(default=False, help_text='Block the step when the hook itself fails or times out.')),
                ('enabled', models.BooleanField(default=True)),
                ('position', models.PositiveIntegerField(default=0, help_text='Hooks run in this order.')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('team', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='hooks', to='teams.team')),
            ],
            options={
                'ordering': ['position', 'id'],
                'indexes': [models.Index(fields=['team', 'event'], name='hook_team_event')],
                'constraints': [models.UniqueConstraint(fields=('team', 'name'), name='hook_unique'), models.CheckConstraint(condition=models.Q(('timeout_seconds__gte', 1), ('timeout_seconds__lte', 300)), name='hook_timeout_range')],
            },
        ),
        migrations.CreateModel(
            name='TeamInvitation',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('username', models.CharField(help_text='Username or email, as typed.', max_length=254)),
                ('role', models.CharField(choices=[('owner', 'Owner'), ('admin', 'Admin'), ('member', 'Member'), ('viewer', 'Viewer')], default='member', max_length=16)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('invited_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('team', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='invitations', to='teams.team')),
            ],
            options={
                'ordering': ['created_at', 'id'],
                'indexes': [models.Index(fields=['username'], name='invitation_username')],
                'constraints': [models.UniqueConstraint(fields=('team', 'username'), name='invitation_unique')],
            },
        ),
        migrations.CreateModel(
            name='TeamSpend',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('month', models.DateField(help_text='First day of the month.')),
                ('cost_usd', models.DecimalField(decimal_places=6, default=0, max_digits=14)),
                ('team', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='spend', to='teams.team')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('team', 'month'), name='spend_unique')],
            },
        ),
        append_only("teams_auditrecord", "audit records"),
    ]
