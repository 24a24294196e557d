"""Run the agent loops: one Celery worker process per core, threads inside each
(canvas/worker_supervisor.py). Any option it does not know goes to every `celery worker`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from canvas.worker_supervisor import SupervisorError, exec_supervisor


class Command(BaseCommand):
    help = (
        "Start one `celery -A canvas worker -P threads` per core and keep them running. "
        "Other options (-Q acp, -l INFO, -B: the first process only) go to every worker."
    )
    # The supervisor never serves a URL nor touches the database: skip the checks' URLconf.
    requires_system_checks: list[str] = []

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parse_known = parser.parse_known_args

        def parse_args(args=None, namespace=None):  # Celery's options pass through
            options, rest = parse_known(args, namespace)
            options.celery_args = rest
            return options

        parser.parse_args = parse_args  # type: ignore[method-assign]
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--processes",
            type=int,
            default=settings.CANVAS_WORKER_PROCESSES,
            help="Worker processes (CANVAS_WORKER_PROCESSES; default: one per core).",
        )
        parser.add_argument(
            "--threads",
            type=int,
            default=settings.CANVAS_WORKER_THREADS,
            help="Threads (slots) per process (CANVAS_WORKER_THREADS; default 8).",
        )
        parser.add_argument(
            "--name",
            default="canvas",
            help="Node names are NAME-<i>@<host>; give a second set on one host another name.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            exec_supervisor(
                processes=options["processes"],
                threads=options["threads"],
                name=options["name"],
                cwd=Path(settings.BASE_DIR),
                celery_args=options.get("celery_args", []),
            )
        except SupervisorError as error:
            raise CommandError(str(error)) from None
