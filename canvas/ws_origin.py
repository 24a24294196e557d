"""Which Origin a websocket handshake may come from: cross-site websocket hijacking defence.

Browsers send cookies with a websocket handshake from any page, so a session-authenticated
socket must come from one of our own pages. Django's CSRF middleware does not see websockets;
this is its Origin rule for them: the full origin (scheme, host, port) must equal the origin
the request was made to (its Host header, with the scheme the browser used: ws → http,
wss → https, or https when the TLS proxy says so through SECURE_PROXY_SSL_HEADER), or one of
CSRF_TRUSTED_ORIGINS (`https://*.example.com` matches subdomains, as for CSRF).

Clients without an Origin (CLIs, scripts) are allowed only with a bearer token, which a
browser page cannot forge.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

DEFAULT_PORTS = {"http": 80, "https": 443}


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


Origin = tuple[str, str, int]
"""(scheme, host, port) with the default port filled in, lowercased."""


def parse_origin(value: str) -> Origin | None:
    """The origin a URL names, or None for anything that is not a plain http(s) origin."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme]


def _is_secure(scope: dict[str, Any]) -> bool:
    if scope.get("scheme") == "wss":
        return True
    proxy_header = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if not proxy_header:
        return False
    name, secure_value = proxy_header
    header = name.removeprefix("HTTP_").replace("_", "-").lower().encode()
    value = _header(scope, header)
    return value is not None and value.split(",")[0].strip() == secure_value


def own_origin(scope: dict[str, Any]) -> Origin | None:
    """The origin the browser connected to, if its Host is one of ALLOWED_HOSTS."""
    host = _header(scope, b"host")
    if not host:
        return None
    domain, _port = split_domain_port(host.lower())
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    scheme = "https" if _is_secure(scope) else "http"
    return parse_origin(f"{scheme}://{host}")


def _trusted(origin: Origin) -> bool:
    scheme, host, port = origin
    for trusted in settings.CSRF_TRUSTED_ORIGINS:
        if "*" in trusted:
            pattern = parse_origin(trusted.replace("*", "wildcard", 1))
            if pattern is None:
                continue
            t_scheme, t_host, t_port = pattern
            suffix = t_host.removeprefix("wildcard")
            if (t_scheme, t_port) == (scheme, port) and is_same_domain(host, suffix):
                return True
        elif parse_origin(trusted) == origin:
            return True
    return False


def origin_allowed(scope: dict[str, Any]) -> bool:
    """May this handshake proceed, as far as its Origin is concerned."""
    value = _header(scope, b"origin")
    if value is None:
        return bool(scope.get("auth_via_token"))
    origin = parse_origin(value)
    if origin is None:
        return False
    return origin == own_origin(scope) or _trusted(origin)
