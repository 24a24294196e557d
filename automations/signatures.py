"""Webhook signatures: HMAC-SHA256 over the raw body with the automation's secret, in two styles.

- GitHub: `X-Hub-Signature-256: sha256=<hex>`, the MAC over the body. Nothing else is
  signed, so the delivery is keyed by the MAC alone: `X-GitHub-Delivery` is the sender's to
  choose (a replay with a new one is the same signed body), so it never enters the key and is
  kept only in the run's recorded headers. GitHub's redelivery (same body) is a duplicate too.
- Timestamped: `X-Canvas-Signature: t=<unix seconds>,v1=<hex>`, the MAC over
  f"{t}.".encode() + body; a timestamp more than TOLERANCE_SECONDS away from now is stale, so
  a captured request replays only within that window, where its MAC is its key.

A key is always the MAC we computed, never text the sender wrote: spacing, case or a second
v1 value cannot make a replay look new. A signature header is normalised (stripped, hex
lower-cased, exactly one `sha256=`) and must be well formed before it is compared.
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
_STAMP = re.compile(r"[0-9]{1,12}")
_HEX_MAC = re.compile(r"[0-9a-f]{64}")
_GITHUB_FORM = "X-Hub-Signature-256 must be sha256=<64 hex digits>."


class SignatureError(ValueError):
    """Missing, malformed, wrong or stale: the delivery is refused (401)."""


@dataclass(frozen=True, slots=True)
class Verified:
    style: str
    """"github" or "timestamped"."""
    delivery_key: str
    """The MAC of the signed content (see the module's docstring): a second delivery with
    this key is a replay, whatever else it changed."""


def _mac(secret: str, message: bytes) -> str:
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def sign_github(secret: str, body: bytes) -> str:
    """The X-Hub-Signature-256 value for `body`."""
    return "sha256=" + _mac(secret, body)


def sign_timestamped(secret: str, body: bytes, timestamp: int) -> str:
    """The X-Canvas-Signature value for `body` sent at `timestamp`."""
    return f"t={timestamp},v1={_mac(secret, f'{timestamp}.'.encode() + body)}"


def _matches(expected: str, given: str) -> bool:
    """`given` normalised (stripped, lower-case) against `expected`, in constant time."""
    given_bytes = given.strip().lower().encode("ascii", "replace")
    return hmac.compare_digest(expected.encode("ascii"), given_bytes)


def _github_mac(value: str) -> str:
    """The hex digest of an X-Hub-Signature-256 value: `sha256=` once (any case), then 64 hex
    digits (any case, spaces around either ignored); SignatureError for anything else."""
    scheme, sep, digest = value.strip().partition("=")
    digest = digest.strip().lower()
    if not sep or scheme.strip().lower() != "sha256" or not _HEX_MAC.fullmatch(digest):
        raise SignatureError(_GITHUB_FORM)
    return digest


def _github(secret: str, body: bytes, headers: Mapping[str, str]) -> Verified:
    expected = _mac(secret, body)
    if not _matches(expected, _github_mac(headers[GITHUB_HEADER])):
        raise SignatureError("the signature does not match the body.")
    return Verified("github", f"sha256:{expected}")


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
