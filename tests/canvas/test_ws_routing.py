"""A websocket path no route matches is refused cleanly, not a 500 with a traceback."""

import pytest
from channels.testing import WebsocketCommunicator

from canvas.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    "path", ["/ws/nope", "/", "/ws/conversations/x/events/extra", "/api/conversations"]
)
async def test_an_unknown_path_closes_with_4404(path):
    communicator = WebsocketCommunicator(application, path)
    assert await communicator.connect() == (False, 4404)


async def test_a_malformed_conversation_id_closes_with_4404(api_token):
    communicator = WebsocketCommunicator(
        application,
        "/ws/conversations/not-a-uuid/events",
        headers=[(b"authorization", f"Bearer {api_token}".encode())],
    )
    assert await communicator.connect() == (False, 4404)
