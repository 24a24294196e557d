"""Webhook signatures: HMAC-SHA256 over the raw body with the automation's secret, in two styles.

- GitHub: `X-Hub-Signature-256: sha256=<hex>`. The delivery is keyed by `X-GitHub-Delivery`
  (GitHub's redelivery of the same event reuses it), else by the signature.
- Timestamped: `X-Canvas-Signature: t=<unix seconds>,v1=<hex>`, the MAC over
  f"{t}.".encode() + body; a timestamp more than TOLERANCE_SECONDS away from now is stale, so
  a captured request replays only within that window, where its signature is its key.

Comparisons are constant-time (hmac.compare_digest). Error messages never echo a header. Pure.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass

TOLERANCE_SECONDS = 300
GITHUB_HEADER = "x-hub-signature-256"
GITHUB_DELIVERY_HEADER = "x-github-delivery"
TIMESTAMPED_HEADER = "x-canvas-signature"
_MAX_KEY_CHARS = 200
_STAMP = re.compile(r"[0-9]{1,12}")


class SignatureError(ValueError):
    """Missing, malformed, wrong or stale: the delivery is refused (401)."""


@dataclass(frozen=True, slots=True)
class Verified:
    style: str
    """"github" or "timestamped"."""
    delivery_key: str
    """Unique per delivery: a second one with this key is a replay."""


def _mac(secret: str, message: bytes) -> str:
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def sign_github(secret: str, body: bytes) -> str:
    """The X-Hub-Signature-256 value for `body`."""
    return "sha256=" + _mac(secret, body)


def sign_timestamped(secret: str, body: bytes, timestamp: int) -> str:
    """The X-Canvas-Signature value for `body` sent at `timestamp`."""
    return f"t={timestamp},v1={_mac(secret, f'{timestamp}.'.encode() + body)}"


def _matches(expected: str, given: str) -> bool:
    given_bytes = given.strip().lower().encode("ascii", "replace")
    return hmac.compare_digest(expected.encode("ascii"), given_bytes)


def _github(secret: str, body: bytes, headers: Mapping[str, str]) -> Verified:
    value = headers[GITHUB_HEADER].strip()
    if not value.startswith("sha256="):
        raise SignatureError("X-Hub-Signature-256 must be sha256=<hex digest>.")
    given = value.removeprefix("sha256=")
    if not _matches(_mac(secret, body), given):
        raise SignatureError("the signature does not match the body.")
    delivery = headers.get(GITHUB_DELIVERY_HEADER, "").strip()[:_MAX_KEY_CHARS]
    return Verified("github", f"github:{delivery}" if delivery else f"sha256:{given.lower()}")


def _timestamped(secret: str, body: bytes, headers: Mapping[str, str], now: float) -> Verified:
    fields: dict[str, list[str]] = {}
    for item in headers[TIMESTAMPED_HEADER].split(","):
        key, sep, value = item.strip().partition("=")
        if sep:
            fields.setdefault(key, []).append(value.strip())
    stamps, macs = fields.get("t", []), fields.get("v1", [])
    if len(stamps) != 1 or not _STAMP.fullmatch(stamps[0]) or not macs:
        raise SignatureError("X-Canvas-Signature must be t=<unix seconds>,v1=<hex digest>.")
    timestamp = int(stamps[0])
    if abs(now - timestamp) > TOLERANCE_SECONDS:
        raise SignatureError(
            f"the signature's timestamp is more than {TOLERANCE_SECONDS} seconds from now."
        )
    expected = _mac(secret, f"{timestamp}.".encode() + body)
    for given in macs:  # several v1 values: a sender rolling over to a new secret
        if _matches(expected, given):
            return Verified("timestamped", f"v1:{expected}")
    raise SignatureError("the signature does not match the body.")


def signature_verify(
    *, secret: str, body: bytes, headers: Mapping[str, str], now: float
) -> Verified:
    """Which style signed `body` and its delivery key; SignatureError otherwise. `headers`
    is looked up by lower-case name. The timestamped style wins when both are sent."""
    headers = {k.lower(): v for k, v in headers.items()}
    if TIMESTAMPED_HEADER in headers:
        return _timestamped(secret, body, headers, now)
    if GITHUB_HEADER in headers:
        return _github(secret, body, headers)
    raise SignatureError(
        "the delivery is not signed: send X-Hub-Signature-256 (GitHub style) or "
        "X-Canvas-Signature (t=...,v1=...)."
    )
