"""safe_http.post over TLS: the socket goes to the checked address, while the server name
(SNI) and the certificate check use the URL's name. Against a real TLS server on 127.0.0.1
with a throwaway certificate; the name is mapped to 127.0.0.1 by a stand-in resolver."""

from __future__ import annotations

import datetime
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from common import safe_http
from common.netguard import BlockedURL, parse_networks
from tests.http_server import QuietHandler, serving

NAME = "hooks.tls.test"
LOOPBACK = parse_networks(["127.0.0.0/8"])


def self_signed(tmp: Path, name: str) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject).issuer_name(subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    cert_path, key_path = tmp / f"{name}.pem", tmp / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )  # fmt: skip
    return cert_path, key_path


@pytest.fixture
def tls_server(tmp_path) -> Iterator[dict]:
    cert, key = self_signed(tmp_path, NAME)
    seen: dict = {"sni": [], "hosts": [], "cert": cert}
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda sock, server_name, ctx: seen["sni"].append(server_name)

    class Handler(QuietHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            self.rfile.read(int(self.headers["Content-Length"]))
            seen["hosts"].append(self.headers["Host"])
            self.send_response(204)
            self.end_headers()

    with serving(Handler, tls=context) as port:
        seen["port"] = port
        yield seen


@pytest.fixture(autouse=True)
def name_to_loopback(monkeypatch) -> None:
    real = socket.getaddrinfo

    def resolver(host, port, *args, **kwargs):
        if host == NAME:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)


def post(url: str, context: ssl.SSLContext, allowed=LOOPBACK) -> int:
    return safe_http.post(
        url, b"{}", headers={"Content-Type": "application/json"}, allowed_networks=allowed,
        timeout=5, ssl_context=context,
    )  # fmt: skip


def test_tls_uses_the_name_for_sni_and_the_certificate(tls_server) -> None:
    context = ssl.create_default_context(cafile=str(tls_server["cert"]))
    assert post(f"https://{NAME}:{tls_server['port']}/x", context) == 204
    assert tls_server["sni"] == [NAME]
    assert tls_server["hosts"] == [f"{NAME}:{tls_server['port']}"]


def test_a_certificate_for_another_name_is_refused(tls_server) -> None:
    context = ssl.create_default_context(cafile=str(tls_server["cert"]))
    with pytest.raises(ssl.SSLCertVerificationError):
        post(f"https://127.0.0.1:{tls_server['port']}/x", context)  # the cert is for NAME


def test_a_refused_target_is_never_connected_to(tls_server) -> None:
    context = ssl.create_default_context(cafile=str(tls_server["cert"]))
    with pytest.raises(BlockedURL, match="resolves to 127.0.0.1, a loopback address"):
        post(f"https://{NAME}:{tls_server['port']}/x", context, allowed=())
    assert tls_server["sni"] == []
