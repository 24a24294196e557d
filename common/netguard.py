"""Which URLs the server may call on a team's behalf: the SSRF guard for notification webhooks
and model profiles' `api_base`.

A URL passes when its scheme is http or https and every address its host stands for is a public
unicast address. Refused: loopback, link-local, private (RFC 1918, unique-local fc00::/7, the
other special-purpose blocks), unspecified, multicast, reserved, shared CGNAT 100.64/10,
deprecated site-local fec0::/10, and those same addresses wrapped in IPv6 (IPv4-mapped, NAT64
64:ff9b::/96, 6to4). A site may let listed ranges through (CANVAS_ALLOWED_PRIVATE_NETWORKS);
cloud metadata endpoints are refused even then, since they hand out the host's credentials.

`check_url(resolve=False)` looks at the URL alone (literal addresses, including the legacy
IPv4 spellings `127.1` and `2130706433` that resolvers accept, and well-known names);
`resolve_url` also resolves the name with getaddrinfo and checks every address. The check and
the connection must use the same addresses, or a name that changes its answer in between (DNS
rebinding) gets through: callers that open the connection themselves connect to
`Target.addresses`. Pure: no Django, no ORM (`site_allowed_networks` reads settings lazily).
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

SCHEMES = frozenset({"http", "https"})
METADATA_NAMES = frozenset({"metadata", "metadata.google.internal", "metadata.goog"})
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "fd00:ec2::254", "169.254.170.2", "100.100.100.200")
)
"""AWS/GCP/Azure/OpenStack, AWS over IPv6, ECS task credentials, Alibaba."""
_SHARED = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LOOPBACK_NAME_STANDS_FOR = ipaddress.ip_address("127.0.0.1")


class BlockedURL(ValueError):
    """The URL may not be called. The message says why, naming the address, never the URL
    (webhook URLs carry credentials in their path)."""


class UnresolvableHost(OSError):
    """The host name did not resolve; nothing was checked, so nothing may be sent."""


@dataclass(frozen=True, slots=True)
class Target:
    """A checked URL: connect to one of `addresses` (all checked), send `host` as Host/SNI."""

    scheme: str
    host: str
    port: int
    addresses: tuple[str, ...]


@lru_cache(maxsize=32)
def _parse_networks(cidrs: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(c.strip(), strict=False) for c in cidrs if c.strip())


def parse_networks(cidrs: Iterable[str]) -> tuple[IPNetwork, ...]:
    """CIDR strings as networks; raises ValueError naming a malformed one."""
    try:
        return _parse_networks(tuple(cidrs))
    except ValueError as exc:
        raise ValueError(f"CANVAS_ALLOWED_PRIVATE_NETWORKS: {exc}") from None


def site_allowed_networks() -> tuple[IPNetwork, ...]:
    """The site's CANVAS_ALLOWED_PRIVATE_NETWORKS, read on every call so a changed setting
    (or a test's override) applies at once; parsing is cached."""
    from django.conf import settings

    return parse_networks(getattr(settings, "CANVAS_ALLOWED_PRIVATE_NETWORKS", ()) or ())


def _unwrap(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 address merely carries (IPv4-mapped, NAT64), else itself."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def _kind(ip: IPAddress) -> str | None:
    """Why `ip` is not a public unicast address, or None when it is."""
    if ip.is_unspecified:
        return "an unspecified address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    if ip in _SHARED:
        return "a shared (CGNAT) address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local:
        return "a site-local address"
    if ip.is_reserved:
        return "a reserved address"
    if ip.is_private:
        return "a private address"
    if not ip.is_global:
        return "a reserved address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.sixtofour is not None:
        inner = _kind(ip.sixtofour)
        return f"a 6to4 address wrapping {inner}" if inner else None
    return None


_NEVER = "which is never allowed."
_UNLESS = (
    "only public addresses are allowed unless a site administrator lists the range in "
    "CANVAS_ALLOWED_PRIVATE_NETWORKS."
)


def _refusal(address: str | IPAddress, allowed: Iterable[IPNetwork]) -> tuple[str, str] | None:
    """(the address, why it is refused and what would allow it), or None when it may be used."""
    if isinstance(address, str):
        address = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone
    ip = _unwrap(address)
    shown = str(ip) if ip == address else f"{address} ({ip})"
    if ip in METADATA_ADDRESSES:
        return shown, f"a cloud metadata endpoint, {_NEVER}"
    if any(ip.version == net.version and ip in net for net in allowed):
        return None
    kind = _kind(ip)
    return None if kind is None else (shown, f"{kind}; {_UNLESS}")


def check_address(address: str | IPAddress, *, allowed_networks: Iterable[IPNetwork]) -> None:
    """Raise BlockedURL unless `address` is public or inside one of `allowed_networks`."""
    refused = _refusal(address, tuple(allowed_networks))
    if refused is not None:
        raise BlockedURL(f"{refused[0]} is {refused[1]}")


def _literal(host: str) -> IPAddress | None:
    """The address a host written as a number stands for, in any spelling a resolver takes."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        pass
    try:  # inet_aton also reads 127.1, 0x7f.1, 017700000001 and 2130706433
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


def _split(url: object) -> tuple[str, str, int]:
    if not isinstance(url, str):
        raise BlockedURL("the URL must be text.")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise BlockedURL("the URL is malformed.") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise BlockedURL("only http(s) URLs are allowed.")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise BlockedURL("the URL has no host.")
    return scheme, host, port or (443 if scheme == "https" else 80)


def _check_host(host: str, allowed: tuple[IPNetwork, ...]) -> IPAddress | None:
    """Checks what the URL alone says; returns the address when the host is one."""
    if host in METADATA_NAMES:
        raise BlockedURL(f"{host} is a cloud metadata endpoint, {_NEVER}")
    literal = _literal(host)
    if literal is not None:
        check_address(literal, allowed_networks=allowed)
        return literal
    if host == "localhost" or host.endswith(".localhost"):  # RFC 6761: always loopback
        refused = _refusal(_LOOPBACK_NAME_STANDS_FOR, allowed)
        if refused is not None:
            raise BlockedURL(f"{host} is a loopback name; {_UNLESS}")
    return None


def _resolve(host: str, port: int) -> tuple[str, ...]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise UnresolvableHost(f"{host} does not resolve: {exc}") from None
    addresses = tuple(dict.fromkeys(info[4][0] for info in infos))
    if not addresses:
        raise UnresolvableHost(f"{host} does not resolve.")
    return addresses


def resolve_url(url: str, *, allowed_networks: Iterable[IPNetwork]) -> Target:
    """Check `url`, resolve its host and check every address it resolves to. Raises
    BlockedURL, or UnresolvableHost when the name does not resolve."""
    allowed = tuple(allowed_networks)
    scheme, host, port = _split(url)
    literal = _check_host(host, allowed)
    if literal is not None:
        return Target(scheme=scheme, host=host, port=port, addresses=(str(literal),))
    addresses = _resolve(host, port)
    for address in addresses:
        refused = _refusal(address, allowed)
        if refused is not None:
            raise BlockedURL(f"{host} resolves to {refused[0]}, {refused[1]}")
    return Target(scheme=scheme, host=host, port=port, addresses=addresses)


def check_url(url: str, *, allowed_networks: Iterable[IPNetwork], resolve: bool = True) -> None:
    """Raise BlockedURL unless the server may call `url`. With `resolve`, also resolve the
    host and check every address (UnresolvableHost when it does not resolve)."""
    if resolve:
        resolve_url(url, allowed_networks=allowed_networks)
    else:
        _check_host(_split(url)[1], tuple(allowed_networks))


def check_url_on_save(url: str, *, allowed_networks: Iterable[IPNetwork]) -> None:
    """The check when a URL is saved: everything `check_url` refuses, except that a name
    which does not resolve (yet, or not from here) is let through. It is resolved and checked
    again before every call, and only what resolves then to allowed addresses is called."""
    with contextlib.suppress(UnresolvableHost):
        check_url(url, allowed_networks=allowed_networks)
