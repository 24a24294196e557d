import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from teams.models import Membership, Role, Team
from teams.services import team_create


class Command(BaseCommand):
    help = "Create the demo login and its team if they do not exist, and print the login."

    def handle(self, *args, **options) -> None:
        username = os.environ.get("CANVAS_DEMO_USER", "demo")
        password = os.environ.get("CANVAS_DEMO_PASSWORD", "demo-password")
        team_name = os.environ.get("CANVAS_DEMO_TEAM", "Demo")
        User = get_user_model()
        user, created = User.objects.get_or_create(username=username)
        if created:
            user.set_password(password)
            user.save()
            self.stdout.write(f"Demo login: {username} / {password}")
        else:
            self.stdout.write(f"Demo login: {username} (password unchanged)")
        team = Team.objects.filter(name=team_name).first()
        if team is None:
            team_create(user=user, name=team_name)  # audited, makes the user its owner
        else:
            Membership.objects.get_or_create(
                team=team, user=user, defaults={"role": Role.OWNER, "is_default": True}
            )
