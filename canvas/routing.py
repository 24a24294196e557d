from django.urls import path

from . import consumers

websocket_urlpatterns = [
    path(
        "ws/conversations/<str:conversation_id>/events",
        consumers.EventStreamConsumer.as_asgi(),
        name="ws-conversation-events",
    ),
]
