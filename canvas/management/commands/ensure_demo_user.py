import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from teams.models import Membership, Role, Team


class Command(BaseCommand):
    help = "Create the demo login if it does not exist, and print it."

    def handle(self, *args, **options) -> None:
        username = os.environ.get("CANVAS_DEMO_USER", "demo")
        password = os.environ.get("CANVAS_DEMO_PASSWORD", "demo-password")
        User = get_user_model()
        user, created = User.objects.get_or_create(username=username)
        if created:
            user.set_password(password)
            user.save()
            self.stdout.write(f"Demo login: {username} / {password}")
        else:
            self.stdout.write(f"Demo login: {username} (password unchanged)")
        team, _ = Team.objects.get_or_create(name=os.environ.get("CANVAS_DEMO_TEAM", "Demo"))
        Membership.objects.get_or_create(
            team=team, user=user, defaults={"role": Role.OWNER, "is_default": True}
        )
