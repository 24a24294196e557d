from django.core.management.base import BaseCommand, CommandError

from teams.crypto import SecretDecryptionError
from teams.notifications import notification_secrets_rotate
from teams.secrets import secrets_rotate


class Command(BaseCommand):
    help = (
        "Re-encrypt every team secret with the first key of CANVAS_SECRET_KEYS. Run after "
        "prepending a new key; drop the old key only once this succeeded."
    )

    def handle(self, *args, **options) -> None:
        try:
            count = secrets_rotate()
            webhooks = notification_secrets_rotate()
        except SecretDecryptionError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"re-encrypted {count} secret(s) with the first configured key")
        self.stdout.write(f"re-encrypted {webhooks} webhook signing secret(s)")
