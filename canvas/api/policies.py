"""Team policies."""

from ninja import Router

router = Router(tags=["policies"])
