"""The Celery app. Tasks are discovered from installed apps; config comes from Django settings."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "canvas.settings")

app = Celery("canvas")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
