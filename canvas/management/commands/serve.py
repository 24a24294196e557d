"""Serve the UI and API with uvicorn; in the embedded mode also run the worker in-process."""

from contextlib import nullcontext

import uvicorn
from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run the web server (and, without REDIS_URL, an in-process Celery worker)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, *args, **options) -> None:
        if settings.EMBEDDED:
            from canvas.embedded import embedded_worker

            worker = embedded_worker()
        else:
            worker = nullcontext()
        with worker:
            mode = "embedded (SQLite, in-process worker)" if settings.EMBEDDED else "production"
            self.stdout.write(
                f"Agent Canvas on http://{options['host']}:{options['port']}/ — {mode}. "
                "Ctrl-C stops."
            )
            uvicorn.run(
                "canvas.asgi:application",
                host=options["host"],
                port=options["port"],
                log_level="warning",
                lifespan="off",
            )
