"""The daemon's client-certificate policy (issue 23 item 12, docs/security.md "Client
certificates"): a chain that verifies against ca.crt is not enough; the client's leaf must hold
an RSA key of at least 3072 bits or an ECDSA key on P-256/P-384/P-521 and must not be a CA.
A raw Python TLS client presents the weak certificates (dyno itself refuses to load them); the
real dyno is served with an ECDSA P-256 certificate and keeps being served after each refusal."""
import os
import shutil
import socket
import ssl
import subprocess
import tempfile

import pytest

from conftest import Daemon, binpath
from daemon_util import frame
import tls_pki as pki


def ec_key(path, curve):
    pki.run("openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", f"ec_paramgen_curve:{curve}",
            "-out", path)
    return path


@pytest.fixture(scope="module")
def pk():
    root = tempfile.mkdtemp(prefix="mmtlsp")
    ns = type("PKI", (), {})()
    ns.root = root
    ns.ca = pki.CA(root, "test-ca")
    ns.skey = pki.rsa_key(os.path.join(root, "server.key"))
    ns.scrt = ns.ca.issue(ns.skey, "localhost", "DNS:localhost,IP:127.0.0.1")
    ns.ckey = pki.rsa_key(os.path.join(root, "client.key"))
    ns.ccrt = ns.ca.issue(ns.ckey, "dyno", client=True)
    ns.k2048 = pki.rsa_key(os.path.join(root, "k2048.key"), 2048)
    ns.c2048 = ns.ca.issue(ns.k2048, "weak", client=True)
    ns.cca = ns.ca.issue(ns.ckey, "ca-as-client", client=True, ca=True)
    ns.kec = ec_key(os.path.join(root, "ec256.key"), "P-256")
    ns.cec = ns.ca.issue(ns.kec, "ec-dyno", client=True)
    ns.sdir = pki.certs_dir(os.path.join(root, "server"), "server", ns.ca.crt, ns.scrt, ns.skey)
    yield ns
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def daemon(pk):
    d = Daemon(extra=["--certs_dir", pk.sdir])
    yield d
    d.stop()


def dyno(pk, port, crt, key, name):
    cdir = pki.certs_dir(os.path.join(pk.root, name), "client", pk.ca.crt, crt, key)
    return subprocess.run([binpath("dyno"), "--certs-dir", cdir, "--hostname", "localhost",
                           "--port", str(port), "status"],
                          capture_output=True, text=True, timeout=60)


def raw_tls_status(pk, port, crt, key):
    """One getStatus over TLS with this client pair: the reply bytes, or the error text."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(pk.ca.crt)
    ctx.load_cert_chain(crt, key)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            with ctx.wrap_socket(s, server_hostname="localhost") as t:
                t.sendall(frame('{"fn":"getStatus"}'))
                data = b""
                while True:
                    chunk = t.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                return data
    except (ssl.SSLError, OSError) as e:
        return "error: %s" % e


@pytest.mark.parametrize("which,why", [
    ("c2048", "RSA key length 2048 bits is less than required 3072 bits"),
    ("cca", "Client certificate must not be a CA"),
])
def test_weak_or_ca_client_certificate_refused(pk, daemon, which, why):
    key = pk.k2048 if which == "c2048" else pk.ckey
    # the chain itself verifies: only the policy refuses it
    subprocess.run(["openssl", "verify", "-CAfile", pk.ca.crt, getattr(pk, which)], check=True,
                   capture_output=True)
    got = raw_tls_status(pk, daemon.port, getattr(pk, which), key)
    assert isinstance(got, str) or b"npumonitor" not in got, got
    daemon.wait_log("tls: handshake with ", timeout=60)
    daemon.wait_log(why, timeout=60)
    # the daemon keeps serving a good client
    good = raw_tls_status(pk, daemon.port, pk.ccrt, pk.ckey)
    assert isinstance(good, bytes) and b"npumonitor" in good, good


def test_ecdsa_p256_client_is_served_by_real_dyno(pk, daemon):
    r = dyno(pk, daemon.port, pk.cec, pk.kec, "ecdir")
    assert r.returncode == 0, r.stdout + r.stderr
    assert '"npumonitor"' in r.stdout
    r = dyno(pk, daemon.port, pk.ccrt, pk.ckey, "rsadir")
    assert r.returncode == 0, r.stdout + r.stderr


def test_dyno_refuses_its_own_ca_certificate(pk):
    cdir = pki.certs_dir(os.path.join(pk.root, "cadir"), "client", pk.ca.crt, pk.cca, pk.ckey)
    r = subprocess.run([binpath("dyno"), "--certs-dir", cdir, "--hostname", "localhost",
                        "--port", "1", "status"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "Client certificate must not be a CA" in r.stderr, r.stderr
