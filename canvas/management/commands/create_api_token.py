from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from teams.tokens import api_token_create


class Command(BaseCommand):
    help = "Create a personal API token for USERNAME and print it (shown only this once)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="cli")

    def handle(self, *args, **options) -> None:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"no user named {options['username']!r}")
        _token, raw = api_token_create(user=user, name=options["name"])
        self.stdout.write(raw)
