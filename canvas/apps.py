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

        # The channel layer is made now, in the main thread, before any server or worker
        # thread exists. Channels' registry makes a layer on first use without a lock: a
        # consumer and the publisher thread (conversations.broadcast) asking at the same
        # moment each got their own, and with the embedded in-memory layer every hint then
        # went to a layer no socket listens on; pages saw events only through the safety
        # poll, in 5-second batches, for the life of the process.
        from channels.layers import get_channel_layer

        get_channel_layer()
