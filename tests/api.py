"""Calling the JSON API as a token holder, from Django's test client."""

from __future__ import annotations

import json
from typing import Any

from django.test import Client

from teams.tokens import api_token_create


def client_for(user) -> Client:
    return Client(headers={"Authorization": f"Bearer {api_token_create(user=user)[1]}"})


def send(client: Client, method: str, url: str, body=None, headers: dict | None = None):
    return getattr(client, method)(
        url,
        data=json.dumps(body) if body is not None else None,
        content_type="application/json",
        headers=headers,
    )


def call(client: Client, method: str, url: str, body=None) -> tuple[int, Any]:
    """`send`, answered as (status, the parsed JSON body or None when it is empty)."""
    response = send(client, method, url, body)
    return response.status_code, (response.json() if response.content else None)
