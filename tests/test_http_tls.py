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
from botocore.exceptions import HTTPClientError
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gpuledger.adapters.base import SourceContext, SourceError, verifying_ssl_context


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


# The shape of EC2's DescribeRegions answer (API reference, DescribeRegions: regionInfo of RegionType items).
DESCRIBE_REGIONS = """<?xml version="1.0" encoding="UTF-8"?>
<DescribeRegionsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
    <requestId>59dbff89-35bd-4eac-99ed-be587EXAMPLE</requestId>
    <regionInfo>
        <item>
            <regionName>us-east-1</regionName>
            <regionEndpoint>ec2.us-east-1.amazonaws.com</regionEndpoint>
            <optInStatus>opt-in-not-required</optInStatus>
        </item>
    </regionInfo>
</DescribeRegionsResponse>"""


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

        def do_POST(self) -> None:  # noqa: N802 - EC2's Query API, DescribeRegions answered as EC2 answers it
            self.rfile.read(int(self.headers["Content-Length"]))
            body = DESCRIBE_REGIONS.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/xml;charset=UTF-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

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


@pytest.mark.parametrize("trusted_by", ["AWS_CA_BUNDLE", "the profile's ca_bundle"])
def test_an_aws_client_trusts_the_ca_bundle_its_configuration_names(
        self_signed_https, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trusted_by: str) -> None:
    url, cert = self_signed_https  # a proxy that inspects TLS, whose CA the user gave boto3
    host = "ec2.us-east-1.amazonaws.com"
    for name in ("AWS_CA_BUNDLE", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    (tmp_path / "config").write_text("[default]\n")

    def regions() -> list[str]:
        ctx = SourceContext("aws", mode="replay", replay_urls={host: url.rstrip("/")}, http_attempts=1)
        return [r["RegionName"] for r in ctx.boto_client("ec2", "us-east-1", host).describe_regions()["Regions"]]

    with pytest.raises(HTTPClientError, match="CERTIFICATE_VERIFY_FAILED"):
        regions()
    if trusted_by == "AWS_CA_BUNDLE":
        monkeypatch.setenv("AWS_CA_BUNDLE", str(cert))
    else:
        (tmp_path / "config").write_text(f"[default]\nca_bundle = {cert}\n")
    # before: the bundle was botocore's setting alone, and gpuledger's own sending refused the proxy's certificate
    assert regions() == ["us-east-1"]
    monkeypatch.setenv("AWS_CA_BUNDLE", str(tmp_path / "no-such-bundle.pem"))
    with pytest.raises(SourceError, match=r"^aws: the CA bundle .*no-such-bundle.pem \(AWS_CA_BUNDLE or the "
                                          r"profile's ca_bundle\) cannot be read: No such file or directory$"):
        regions()
