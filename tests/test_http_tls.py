"""Every source's httpx client shares one certificate-verifying TLS context: loading the CA bundle
costs about 0.15 s of CPU, once per process instead of once per client, and sharing it must not
loosen verification."""

from __future__ import annotations

import datetime as dt
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gpuledger.adapters.base import SourceContext, verifying_ssl_context


def _pool_context(client: httpx.Client) -> ssl.SSLContext:
    # httpx keeps the context on its transport's connection pool (no public accessor).
    return client._transport._pool._ssl_context  # type: ignore[attr-defined]


def test_clients_share_one_context_that_verifies_certificates() -> None:
    with SourceContext("lambda").http_client() as a, SourceContext("vultr").http_client(headers={"X": "1"}) as b:
        assert _pool_context(a) is _pool_context(b) is verifying_ssl_context()
    ctx = verifying_ssl_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.cert_store_stats()["x509_ca"] > 100  # certifi's bundle, not an empty store


def test_a_caller_s_own_verify_setting_is_kept() -> None:
    own = ssl.create_default_context()
    with SourceContext("lambda").http_client(verify=own) as client:
        assert _pool_context(client) is own


@pytest.fixture(scope="module")
def self_signed_https(tmp_path_factory: pytest.TempPathFactory):
    """A loopback HTTPS server whose certificate no CA signed."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .sign(key, hashes.SHA256()))
    folder: Path = tmp_path_factory.mktemp("tls")
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))

    class Hello(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(folder / "cert.pem", folder / "key.pem")
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"https://localhost:{server.server_address[1]}/", folder / "cert.pem"
    server.shutdown()
    server.server_close()


def test_the_shared_context_refuses_a_certificate_no_ca_signed(self_signed_https) -> None:
    url, cert = self_signed_https
    for provider in ("lambda", "vultr"):  # the second client gets the context the first one made
        with SourceContext(provider).http_client() as client, pytest.raises(httpx.ConnectError,
                                                                            match="CERTIFICATE_VERIFY_FAILED"):
            client.get(url)
    # The same server is reachable once its certificate is trusted: the refusal above was the check.
    with SourceContext("lambda").http_client(verify=ssl.create_default_context(cafile=str(cert))) as client:
        assert client.get(url).status_code == 200
