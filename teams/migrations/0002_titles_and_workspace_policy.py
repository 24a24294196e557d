"""A team's model-written titles (Team.model_titles) and its policy's workspace rules (kinds,
images, container limits)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('teams', '0001_squashed'),
    ]

    operations = [
        migrations.AddField(
            model_name='team',
            name='model_titles',
            field=models.BooleanField(default=False, help_text="New conversations get a short title written by their own model (one small call on a worker) instead of the prompt's first line."),
        ),
        migrations.AddField(
            model_name='policy',
            name='allowed_images',
            field=models.JSONField(blank=True, default=list, help_text='Docker images; empty allows every image the site lists (CANVAS_DOCKER_IMAGES).'),
        ),
        migrations.AddField(
            model_name='policy',
            name='allowed_workspace_kinds',
            field=models.JSONField(blank=True, default=list, help_text='Workspace kinds (local, docker); empty allows all.'),
        ),
        migrations.AddField(
            model_name='policy',
            name='docker_cpus',
            field=models.FloatField(blank=True, help_text='CPUs per container.', null=True),
        ),
        migrations.AddField(
            model_name='policy',
            name='docker_memory_mb',
            field=models.PositiveIntegerField(blank=True, help_text='Memory per container, MB.', null=True),
        ),
        migrations.AddField(
            model_name='policy',
            name='docker_pids',
            field=models.PositiveIntegerField(blank=True, help_text='Processes per container.', null=True),
        ),
    ]
