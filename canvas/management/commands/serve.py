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
        parser.add_argument(
            "--prepare",
            action="store_true",
            help="First apply pending migrations and make sure the demo login exists (make up).",
        )

    def handle(self, *args, **options) -> None:
        from canvas.asgi import application
        from canvas.request_log import RequestLog

        if options["prepare"]:
            from canvas.startup import prepare

            prepare(self.stdout)
        if settings.EMBEDDED:
            from canvas.embedded import embedded_worker

            worker = embedded_worker(wait=False)  # serve while it starts
        else:
            worker = nullcontext()
        with worker:
            mode = "embedded (SQLite, in-process worker)" if settings.EMBEDDED else "production"
            self.stdout.write(
                f"Agent Canvas on http://{options['host']}:{options['port']}/ — {mode}. "
                "Ctrl-C stops."
            )
            uvicorn.run(
                RequestLog(application),
                host=options["host"],
                port=options["port"],
                log_level="warning",
                access_log=False,  # RequestLog writes one line per request, without queries
                lifespan="off",
            )
