"""The edges: settings, the browser UI (views, templates, the page websocket), the JSON API
(`api/`), the event websocket, the CLI commands, the Celery app and the embedded mode. Thin:
every decision is a call into orchestration's services or teams' services; nothing imports
canvas."""

from .celery import app as celery_app

__all__ = ["celery_app"]
