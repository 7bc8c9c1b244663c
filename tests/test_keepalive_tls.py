"""The default pool over real TLS on loopback: kept sockets are wrapped, certificates
verified (a self-signed one is refused by default), and both kinds of answers work."""

from __future__ import annotations

import datetime
import ipaddress
import ssl

import pytest

from toolnexus import ask, create_client, stream
from toolnexus.core.errors import ProviderError
from toolnexus.drivers import keepalive
from toolnexus.drivers.keepalive import KeepAlivePool
from toolnexus.testing import fake_provider

x509 = pytest.importorskip("cryptography.x509")


@pytest.fixture(autouse=True, params=["httptools", "stdlib"])
def reader(request, monkeypatch):
    """Each test with each answer reader (stdlib: a machine without httptools)."""
    if request.param == "stdlib":
        monkeypatch.setattr(keepalive, "httptools", None)
    return request.param


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1: (certificate file, key file)."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "toolnexus test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    d = tmp_path_factory.mktemp("tls")
    (d / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (d / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()))  # fmt: skip
    return str(d / "cert.pem"), str(d / "key.pem")


@pytest.fixture
def tls_provider(certificate):
    """A fake provider behind TLS: (its https base URL, the provider)."""
    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_cert_chain(*certificate)
    fp = fake_provider(lambda body, dialect: {"content": "over tls"}, chunk=4)
    fp._server.socket = server_side.wrap_socket(fp._server.socket, server_side=True)
    with fp:
        yield fp.url.replace("http://", "https://"), fp


def _pool(cafile: str) -> KeepAlivePool:
    trusting = ssl.create_default_context(cafile=cafile)
    return KeepAlivePool(trusting, max_connections=10, max_keepalive_connections=5,
                         keepalive_expiry=5.0)  # fmt: skip


def test_whole_and_streamed_answers_over_tls_on_a_kept_connection(certificate, tls_provider):
    url, fp = tls_provider
    pool = _pool(certificate[0])
    client = create_client(base_url=url, model="m", api_key="sk-tls", retries=0, transport=pool)
    assert ask(client, "one")["text"] == "over tls"
    [(_, conn)] = [free[0] for free in pool.idle.free.values()]
    assert isinstance(conn.sock, ssl.SSLSocket)
    assert "".join(e["delta"] for e in stream(client, "two") if e["type"] == "text") == "over tls"
    assert ask(client, "three")["text"] == "over tls"
    assert len(fp.requests) == 3
    pool.close()


def test_a_certificate_nobody_vouches_for_is_refused_by_default(tls_provider):
    url, fp = tls_provider
    client = create_client(base_url=url, model="m", api_key="sk-tls", retries=0)
    with pytest.raises(ProviderError, match="CERTIFICATE_VERIFY_FAILED") as refused:
        ask(client, "hi")
    assert "sk-tls" not in str(refused.value) and fp.requests == []
    client.close()


def test_async_streams_over_tls_and_an_unvouched_certificate_refused(
    certificate, tls_provider, reader
):
    import asyncio

    from toolnexus import astream
    from toolnexus.drivers.keepalive_async import AsyncKeepAlivePool

    url, fp = tls_provider
    if reader == "httptools":  # the kept-connection pool (without httptools: httpcore's)
        pool = AsyncKeepAlivePool(ssl.create_default_context(cafile=certificate[0]), 5, 5.0)
        client = create_client(base_url=url, model="m", api_key="sk-tls", retries=0,
                               transport=pool)  # fmt: skip

        async def go():
            for _ in range(2):
                events = [e async for e in astream(client, "hi")]
                assert events[-1]["result"]["text"] == "over tls"
            [conn] = [c for free in pool.free.values() for _, c in free]
            assert conn.transport.get_extra_info("ssl_object") is not None

        asyncio.run(go())
    default = create_client(base_url=url, model="m", api_key="sk-tls", retries=0)

    async def refused():
        with pytest.raises(ProviderError, match="CERTIFICATE_VERIFY_FAILED"):
            [e async for e in astream(default, "hi")]

    asyncio.run(refused())
    assert len(fp.requests) == (2 if reader == "httptools" else 0)
