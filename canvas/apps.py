from django.apps import AppConfig


class CanvasConfig(AppConfig):
    name = "canvas"

    def ready(self) -> None:
        # conversations may not import teams; the project joins them: the event log redacts
        # each team's secrets, read (and decrypted) by teams.
        from conversations.redaction import register_secret_source
        from teams.secrets import secret_values_for_team

        register_secret_source(secret_values_for_team)

        # Error texts are redacted as they leave, for the person asking (canvas.outbound).
        from common.errors import register_detail_scrubber

        from .outbound import scrub

        register_detail_scrubber(scrub)

        # Open websockets re-check access when a token, membership or user changes.
        from .access_signals import connect_access_signals

        connect_access_signals()
