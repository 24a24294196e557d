"""Bad API tokens on the websocket count against the client's address, as on the API."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from canvas.asgi import application
from teams.models import AuditRecord
from teams.throttle import token_throttle_reset
from tests.factories import make_conversation

pytestmark = pytest.mark.django_db(transaction=True)

ADDRESS = "203.0.113.7"


@pytest.fixture
def limits(settings):
    settings.CANVAS_TOKEN_FAILURE_LIMIT = 3
    settings.CANVAS_TOKEN_COOLOFF_SECONDS = 60
    yield
    for address in (ADDRESS, "203.0.113.8"):
        token_throttle_reset(address)


async def connect(url: str, token: str, address: str) -> tuple[bool, object]:
    communicator = WebsocketCommunicator(
        application, url, headers=[(b"authorization", f"Bearer {token}".encode())]
    )
    communicator.scope["client"] = (address, 50000)  # the app reads the scope on first await
    result = await communicator.connect()
    if result[0]:
        await communicator.disconnect()
    return result


async def test_many_bad_tokens_block_the_address_for_bad_tokens_only(user, api_token, limits):
    conversation = await database_sync_to_async(make_conversation)(user)
    url = f"/ws/conversations/{conversation.pk}/events"
    for i in range(3):
        assert await connect(url, f"cnv_wrong{i}", ADDRESS) == (False, 4403)  # anonymous
    assert await connect(url, "cnv_wrong-again", ADDRESS) == (False, 4429)
    assert (await connect(url, api_token, ADDRESS))[0]  # a good token is never throttled
    assert (await connect(url, api_token, "203.0.113.8"))[0]  # another address still works
    lockouts = AuditRecord.objects.filter(kind="auth.lockout", target__contains=ADDRESS)
    assert await lockouts.acount() == 1
