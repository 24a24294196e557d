"""ASGI entry point: HTTP goes to Django, websockets through auth to the relay consumers.

Origin checks happen in the consumers (see consumers.origin_allowed) because token-authenticated
API clients legitimately connect without an Origin header.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "canvas.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from .routing import websocket_urlpatterns  # noqa: E402
from .ws_auth import auth_stack  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": auth_stack(URLRouter(websocket_urlpatterns)),
    }
)
