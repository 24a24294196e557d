"""Run one conversation to its end from a terminal, printing its events as they land."""

from __future__ import annotations

import json
import time
from contextlib import nullcontext

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from canvas.formatting import event_line
from common.errors import ServiceError
from conversations import store
from conversations.events import RunFinishedEvent, Status
from conversations.models import Conversation
from orchestration import services

POLL_SECONDS = 0.05


class Command(BaseCommand):
    help = "Start a conversation and follow it to the end. Exits 0 when it FINISHED."
    # Django's system checks import the whole URLconf (every view and the API, seconds on a
    # busy machine) that a command line never serves; `manage.py check` and the server run them.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("prompt")
        parser.add_argument("--model", default=settings.CANVAS_DEFAULT_MODEL)
        parser.add_argument(
            "--agent", default=None, help="An external ACP agent's profile name instead of --model."
        )
        parser.add_argument(
            "--workspace",
            default=None,
            help="Directory the agent works in: an absolute path is used as given (the operator's"
            " choice, anywhere on this machine); a plain name is a folder in the team's area.",
        )
        parser.add_argument("--user", default=None, help="Owner username (default: none).")
        parser.add_argument(
            "--team", default=None, help="Team id (default: the user's, or the Local team)."
        )
        parser.add_argument("--json", action="store_true", help="Print JSON lines.")
        parser.add_argument("--max-iterations", type=int, default=None)
        parser.add_argument("--timeout", type=float, default=3600.0, help="Give up after N s.")

    def handle(self, *args, **options) -> None:
        owner = None
        if options["user"]:
            owner = get_user_model().objects.filter(username=options["user"]).first()
            if owner is None:
                raise CommandError(f"no user named {options['user']!r}")
        if settings.EMBEDDED:
            from canvas.embedded import embedded_worker

            worker = embedded_worker()
        else:
            worker = nullcontext()
        with worker:
            try:
                conversation = services.conversation_create(
                    owner=owner,
                    prompt=options["prompt"],
                    model=options["model"],
                    workspace=options["workspace"],
                    max_iterations=options["max_iterations"],
                    # A local operator may point at any directory; the API and the UI never can.
                    unrestricted_workspace=True,
                    team=options["team"],
                    agent=options["agent"],
                )
            except ServiceError as exc:
                raise CommandError(exc.detail) from exc
            status = self.follow(conversation, options["json"], options["timeout"])
        if status != Status.FINISHED:
            raise CommandError(f"conversation {conversation.pk} ended {status}", returncode=1)

    def follow(self, conversation: Conversation, as_json: bool, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        last_seq = 0
        while time.monotonic() < deadline:
            for stored in store.load(conversation.pk, after_seq=last_seq):
                last_seq = stored.seq
                if as_json:
                    self.stdout.write(json.dumps(stored.as_record()))
                else:
                    self.stdout.write(event_line(stored.seq, stored.event))
                if isinstance(stored.event, RunFinishedEvent):
                    return stored.event.status
            time.sleep(POLL_SECONDS)
        return "timed out"
