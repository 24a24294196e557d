"""The SSRF guard (common/netguard.py): what a team's webhook or model profile may point at.

Pure checks, no traffic: literal addresses are never resolved, "localhost" resolves from
/etc/hosts, and the one lookup that must answer with a private address is a stand-in
resolver (the rest of these tests use the real one)."""

from __future__ import annotations

import socket

import pytest

from common import netguard
from common.netguard import BlockedURL, UnresolvableHost, check_url, parse_networks, resolve_url

LOOPBACK = parse_networks(["127.0.0.0/8"])

REFUSED = {
    "http://169.254.169.254/latest/meta-data/": "cloud metadata",
    "http://[fd00:ec2::254]/latest/": "cloud metadata",
    "http://metadata.google.internal/computeMetadata/v1/": "cloud metadata",
    "http://metadata/computeMetadata/v1/": "cloud metadata",
    "http://METADATA.google.internal./": "cloud metadata",
    "http://[::ffff:169.254.169.254]/": "cloud metadata",
    "http://10.0.0.1/hook": "private",
    "http://172.16.5.4/": "private",
    "http://192.168.1.1:8080/": "private",
    "http://[fc00::1]/": "private",
    "http://[fd12:3456::1]/": "private",
    "http://127.0.0.1:5432/": "loopback",
    "http://[::1]:6379/": "loopback",
    "http://localhost:5432/": "loopback",
    "http://db.localhost/": "loopback",
    "http://127.1/": "loopback",
    "http://2130706433/": "loopback",
    "http://0x7f000001/": "loopback",
    "http://[::ffff:127.0.0.1]/": "loopback",
    "http://[::ffff:10.0.0.1]/": "private",
    "http://[64:ff9b::a00:1]/": "private",
    "http://[2002:c0a8:101::1]/": "6to4",
    "http://169.254.1.1/": "link-local",
    "http://[fe80::1]/": "link-local",
    "http://[fe80::1%25eth0]/": "link-local",
    "http://0.0.0.0:8000/": "unspecified",
    "http://[::]/": "unspecified",
    "http://224.0.0.1/": "multicast",
    "http://[ff02::1]/": "multicast",
    "http://240.0.0.1/": "reserved",
    "http://255.255.255.255/": "reserved",
    "http://100.64.0.1/": "CGNAT",
    "http://100.127.255.254/": "CGNAT",
    "http://[fec0::1]/": "site-local",
}


@pytest.mark.parametrize(("url", "why"), REFUSED.items())
def test_internal_targets_are_refused_from_the_url_alone(url, why) -> None:
    with pytest.raises(BlockedURL, match=why):
        check_url(url, allowed_networks=(), resolve=False)
    with pytest.raises(BlockedURL, match=why):
        check_url(url, allowed_networks=())


@pytest.mark.parametrize(
    "url", ["ftp://93.184.216.34/", "file:///etc/passwd", "gopher://93.184.216.34:6379/_", "nope"]
)
def test_only_http_and_https(url) -> None:
    with pytest.raises(BlockedURL, match=r"only http\(s\) URLs"):
        check_url(url, allowed_networks=())


@pytest.mark.parametrize("url", ["http://[::1", "http:///path", "http://93.184.216.34:99999/"])
def test_malformed_urls_are_refused(url) -> None:
    with pytest.raises(BlockedURL):
        check_url(url, allowed_networks=())


@pytest.mark.parametrize(
    "url",
    [
        "http://93.184.216.34/hook",
        "https://93.184.216.34:8443/services/T1/B2/x?y=1",
        "https://[2606:2800:220:1:248:1893:25c8:1946]/",
        "https://[::ffff:93.184.216.34]/",
    ],
)
def test_public_literal_addresses_pass_without_a_lookup(url, monkeypatch) -> None:
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: pytest.fail("no lookup"))
    check_url(url, allowed_networks=())
    assert resolve_url(url, allowed_networks=()).addresses[0] in url or "::ffff" in url


def test_listed_ranges_are_allowed_and_only_those() -> None:
    allowed = parse_networks(["10.0.0.0/8", "fd00:1::/32"])
    check_url("http://10.1.2.3:8080/hook", allowed_networks=allowed)
    check_url("http://[fd00:1::5]/", allowed_networks=allowed)
    check_url("http://[::ffff:10.9.9.9]/", allowed_networks=allowed)  # the same address
    for url in ("http://192.168.1.1/", "http://127.0.0.1/", "http://[fd00:2::5]/"):
        with pytest.raises(BlockedURL):
            check_url(url, allowed_networks=allowed)


def test_cloud_metadata_stays_refused_even_inside_an_allowed_range() -> None:
    allowed = parse_networks(["169.254.0.0/16", "fd00::/8", "0.0.0.0/0"])
    check_url("http://169.254.1.1/", allowed_networks=allowed)
    for url in (
        "http://169.254.169.254/",
        "http://[fd00:ec2::254]/",
        "http://metadata.google.internal/",
    ):
        with pytest.raises(BlockedURL, match="never allowed"):
            check_url(url, allowed_networks=allowed)


def test_localhost_is_resolved_for_real_and_follows_the_setting() -> None:
    target = resolve_url("http://localhost:8080/x", allowed_networks=LOOPBACK)
    assert target.host == "localhost" and target.port == 8080
    assert target.addresses and all(a.startswith("127.") for a in target.addresses), target
    with pytest.raises(BlockedURL, match="loopback"):
        resolve_url("http://localhost:8080/x", allowed_networks=())


def test_every_address_a_name_resolves_to_is_checked(monkeypatch) -> None:
    def resolver(host, port, *args, **kwargs):
        assert host == "hooks.internal.example"
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port)),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    with pytest.raises(BlockedURL, match=r"hooks.internal.example resolves to 10.0.0.7, a private"):
        check_url("https://hooks.internal.example/x", allowed_networks=())
    check_url("https://hooks.internal.example/x", allowed_networks=(), resolve=False)
    allowed = parse_networks(["10.0.0.0/24"])
    assert resolve_url("https://hooks.internal.example/x", allowed_networks=allowed).addresses == (
        "93.184.216.34", "10.0.0.7",
    )  # fmt: skip


def test_a_name_that_does_not_resolve_is_refused_at_send_and_let_through_at_save() -> None:
    with pytest.raises(UnresolvableHost):
        check_url("https://no-such-host.invalid/hook", allowed_networks=())
    netguard.check_url_on_save("https://no-such-host.invalid/hook", allowed_networks=())
    with pytest.raises(BlockedURL):
        netguard.check_url_on_save("http://[::1]/", allowed_networks=())


def test_refusals_name_the_address_never_the_url() -> None:
    with pytest.raises(BlockedURL) as caught:
        check_url("http://10.0.0.1/services/T1/B2/path-token", allowed_networks=())
    assert "path-token" not in str(caught.value)
    assert "CANVAS_ALLOWED_PRIVATE_NETWORKS" in str(caught.value)


def test_a_malformed_allowed_range_is_named() -> None:
    with pytest.raises(ValueError, match="CANVAS_ALLOWED_PRIVATE_NETWORKS: '10.0.0.0/33'"):
        parse_networks(["10.0.0.0/33"])


def test_the_site_setting_is_read_on_every_call(settings) -> None:
    settings.CANVAS_ALLOWED_PRIVATE_NETWORKS = []
    assert netguard.site_allowed_networks() == ()
    settings.CANVAS_ALLOWED_PRIVATE_NETWORKS = ["192.168.0.0/16"]
    check_url("http://192.168.3.4/", allowed_networks=netguard.site_allowed_networks())
