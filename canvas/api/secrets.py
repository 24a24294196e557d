"""Team secrets."""

from ninja import Router

router = Router(tags=["secrets"])
