"""Encryption of secret values at rest: Fernet (AES-128-CBC + HMAC-SHA256) behind MultiFernet.

Keys come from settings.CANVAS_SECRET_KEYS (env `CANVAS_SECRET_KEYS`, comma-separated Fernet
keys, e.g. from `Fernet.generate_key()`). The first key encrypts; every key decrypts. To rotate:
prepend a new key ("NEW,OLD"), run `manage.py rotate_secrets`, then drop the old key.

Unset (embedded and dev mode only), one key is derived from settings.SECRET_KEY with HKDF-SHA256
so `make up` works without setup. Production must set CANVAS_SECRET_KEYS: with the derived key,
changing SECRET_KEY (which Django lets you rotate for sessions) would make every secret
unreadable, and the key is only as strong as SECRET_KEY.
"""

from __future__ import annotations

import base64
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

_DERIVATION_INFO = b"agent-canvas team secrets v1"


class SecretDecryptionError(RuntimeError):
    """A stored value none of the configured keys can open: a wrong or incomplete key set."""

    def __init__(self, name: str, team_id: int | None = None) -> None:
        owner = f" of team {team_id}" if team_id is not None else ""
        super().__init__(
            f"secret {name!r}{owner} cannot be decrypted with the configured "
            "CANVAS_SECRET_KEYS (a key is missing or wrong; restore the key it was encrypted "
            "with, listed after the current one)"
        )
        self.name = name


@lru_cache(maxsize=8)
def derived_key(secret_key: str) -> str:
    """The Fernet key used when CANVAS_SECRET_KEYS is unset."""
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_DERIVATION_INFO)
    return base64.urlsafe_b64encode(hkdf.derive(secret_key.encode("utf-8"))).decode("ascii")


def _configured_keys() -> tuple[str, ...]:
    keys = tuple(k.strip() for k in getattr(settings, "CANVAS_SECRET_KEYS", []) if k.strip())
    return keys or (derived_key(settings.SECRET_KEY),)


def _fernet() -> MultiFernet:
    """The MultiFernet for the current key list (settings may change it, as tests do)."""
    return _multi_fernet(_configured_keys())


@lru_cache(maxsize=8)
def _multi_fernet(keys: tuple[str, ...]) -> MultiFernet:
    fernets = []
    for position, key in enumerate(keys, start=1):
        try:
            fernets.append(Fernet(key))
        except (ValueError, TypeError):  # never echo the key itself
            raise ImproperlyConfigured(
                f"CANVAS_SECRET_KEYS: key #{position} is not a Fernet key (32 url-safe "
                "base64-encoded bytes, as Fernet.generate_key() makes)."
            ) from None
    return MultiFernet(fernets)


def encrypt(value: str) -> str:
    return _fernet().encrypt(value.encode("utf-8")).decode("ascii")


def decrypt(token: str, *, name: str, team_id: int | None = None) -> str:
    try:
        return _fernet().decrypt(token.encode("ascii")).decode("utf-8")
    except (InvalidToken, UnicodeError):
        raise SecretDecryptionError(name, team_id) from None


def reencrypt(token: str, *, name: str, team_id: int | None = None) -> str:
    """The same value encrypted with the first key."""
    try:
        return _fernet().rotate(token.encode("ascii")).decode("ascii")
    except (InvalidToken, UnicodeError):
        raise SecretDecryptionError(name, team_id) from None
