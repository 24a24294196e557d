from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "teams"

    def ready(self) -> None:
        from .throttle import connect_lockout_audit

        connect_lockout_audit()
