from django.urls import path, re_path

from . import consumers, runs_consumer, ui_consumers

websocket_urlpatterns = [
    path(
        "ws/conversations/<str:conversation_id>/events",
        consumers.EventStreamConsumer.as_asgi(),
        name="ws-conversation-events",
    ),
    path(
        "ws/ui/conversations/<str:conversation_id>/",
        ui_consumers.ConversationPageConsumer.as_asgi(),
        name="ws-ui-conversation",
    ),
    path(
        "ws/ui/teams/<int:team_id>/runs/",
        runs_consumer.RunsPageConsumer.as_asgi(),
        name="ws-ui-team-runs",
    ),
    # Last: channels' router raises (a 500 and a traceback) for a path no route matches.
    re_path(r"", consumers.NoRouteConsumer.as_asgi(), name="ws-no-route"),
]
