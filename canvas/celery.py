"""The Celery app. Tasks are discovered from installed apps; config comes from Django settings."""

import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "canvas.settings")

app = Celery("canvas")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _announce_ready(**_: object) -> None:
    # Lets supervisors and tests wait for a worker that really consumes, without polling
    # the broker.
    ready_file = os.environ.get("CANVAS_WORKER_READY_FILE")
    if ready_file:
        with open(ready_file, "w") as handle:
            handle.write(str(os.getpid()))
