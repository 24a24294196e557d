"""URLs a team saves for its workers to call (a model's api_base, the notification webhook):
the one check both pass when they are saved."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator

from common import netguard
from common.errors import InvalidInput


def outbound_url_check(url: str, *, what: str) -> None:
    """Refuse `url` (named `what` in the message) when it points at a network the site blocks
    (checked again on every call) or is not an http(s) URL."""
    try:
        netguard.check_url_on_save(url, allowed_networks=netguard.site_allowed_networks())
    except netguard.BlockedURL as exc:
        raise InvalidInput(f"{what} is refused: {exc}") from None
    try:
        URLValidator(schemes=["http", "https"])(url)
    except ValidationError:
        raise InvalidInput(f"{what} must be an http(s) URL.") from None
