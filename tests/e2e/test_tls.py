"""Mutual TLS end to end (docs/design/rpc.md#mutual-tls, issue 13 item 1): a real dynolog with --certs_dir and the
real dyno with --certs-dir, certificates made by the openssl CLI per test module. Every bad
certificate gets one clear error; start-up failures exit 1; the daemon keeps serving others;
stalled handshakes hold only their own connection."""
import json
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

PASS = "s3cret-Pass phrase"


@pytest.fixture(scope="module")
def pk():
    root = tempfile.mkdtemp(prefix="mmtls")
    ns = type("PKI", (), {})()
    ns.root = root
    ns.ca = pki.CA(root, "test-ca")
    ns.other = pki.CA(root, "other-ca")
    ns.skey = pki.rsa_key(os.path.join(root, "server.key"))
    ns.ckey = pki.rsa_key(os.path.join(root, "client.key"))
    ns.k2048 = pki.rsa_key(os.path.join(root, "k2048.key"), 2048)
    san = "DNS:localhost,IP:127.0.0.1,IP:::1"
    ns.scrt = ns.ca.issue(ns.skey, "localhost", san)
    ns.ccrt = ns.ca.issue(ns.ckey, "dyno", client=True)
    ns.n = 0
    yield ns
    shutil.rmtree(root, ignore_errors=True)


def mkdir(pk, role, ca=None, crt=None, key=None, crl=None):
    pk.n += 1
    ca = ca or pk.ca.crt
    crt = crt or (pk.scrt if role == "server" else pk.ccrt)
    key = key or (pk.skey if role == "server" else pk.ckey)
    return pki.certs_dir(os.path.join(pk.root, f"{role}{pk.n}"), role, ca, crt, key, crl)


def dyno(*args, certs=None, port=None, host="localhost", timeout=60):
    argv = [binpath("dyno")]
    if certs:
        argv += ["--certs-dir", certs]
    argv += ["--hostname", host]
    if port:
        argv += ["--port", str(port)]
    argv += list(args) or ["status"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def start_fail(*extra):
    """A daemon run that must refuse to start: (returncode, output)."""
    p = subprocess.run([binpath("dynolog"), "--port", "1", *extra], capture_output=True,
                       text=True, timeout=60, stdin=subprocess.DEVNULL, start_new_session=True)
    return p.returncode, p.stdout + p.stderr


@pytest.fixture
def tls_daemon(pk):
    made = []

    def make(sdir=None, extra=()):
        d = Daemon(extra=["--certs_dir", sdir or mkdir(pk, "server"), "--rpc_max_clients", "64",
                          *extra])
        made.append(d)
        return d
    yield make
    for d in made:
        d.stop()


def assert_served(d, pk):
    r = dyno(certs=mkdir(pk, "client"), port=d.port)
    assert r.returncode == 0, r.stdout + r.stderr
    assert '"npumonitor"' in r.stdout


def test_valid_pair_works(pk, tls_daemon):
    d = tls_daemon()
    cdir = mkdir(pk, "client")
    r = dyno(certs=cdir, port=d.port)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stdout.splitlines() if not x.startswith("Security Warning")]
    assert lines[:5] == [
        "Running in certificate mode",
        f"Loading CA cert from: {cdir}/ca.crt",
        f"Loading client cert from: {cdir}/client.crt",
        f"CRL file does not exist: {cdir}/ca.crl",
        f"Loading client key from: {cdir}/client.key",
    ]
    status = json.loads(lines[5])   # the getStatus reply, over TLS
    assert status["npumonitor"] == "Uninitialized" and status["processes"] == []
    # by IP literal: the IP SAN matches; version too; dyno.sock stays plain under TLS
    r = dyno("version", certs=cdir, port=d.port, host="127.0.0.1")
    assert r.returncode == 0 and '"version"' in r.stdout, r.stderr
    r = subprocess.run([binpath("dyno"), "--certs-dir", cdir, "--hostname", "unix:" + d.sock("dyno.sock"),
                        "status"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "Note: TLS is not used for local socket targets" in r.stdout, r.stderr
    assert "TLS: RPC on TCP requires mutual TLS" in d.log()


def test_many_hosts_load_key_once(pk, tls_daemon):
    d = tls_daemon()
    cdir = mkdir(pk, "client")
    r = dyno(certs=cdir, port=d.port, host="localhost,127.0.0.1,[::1]")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("Loading client key from:") == 1
    assert "Summary: 3 hosts, 3 succeeded, 0 failed" in r.stdout


def test_wrong_ca_client_refused_daemon_keeps_serving(pk, tls_daemon):
    d = tls_daemon()
    bad = mkdir(pk, "client", crt=pk.other.issue(pk.ckey, "intruder", client=True))
    r = dyno(certs=bad, port=d.port)
    assert r.returncode == 1
    err = r.stderr.strip()
    assert err == "The server refused the TLS session: tlsv1 alert unknown ca", err
    d.wait_log("tls: handshake with ")
    assert "unable to get local issuer certificate" in d.log() or "unknown ca" in d.log()
    assert_served(d, pk)


def test_server_from_wrong_ca_rejected_by_dyno(pk, tls_daemon):
    d = tls_daemon()
    # dyno trusts only other-ca: the daemon's certificate does not verify
    cdir = mkdir(pk, "client", ca=pk.other.crt, crt=pk.other.issue(pk.ckey, "dyno", client=True))
    r = dyno(certs=cdir, port=d.port)
    assert r.returncode == 1
    assert r.stderr in ("TLS handshake with localhost failed: server certificate rejected: "
                        "unable to get local issuer certificate\n",
                        "TLS handshake with localhost failed: server certificate rejected: "
                        "self-signed certificate in certificate chain\n"), r.stderr
    assert_served(d, pk)


@pytest.mark.parametrize("when,text", [
    (("20200101000000Z", "20200201000000Z"), "certificate has expired (notAfter Feb  1 00:00:00 2020 GMT)"),
    (("20990101000000Z", "20990201000000Z"), "certificate is not yet valid (notBefore Jan  1 00:00:00 2099 GMT)"),
])
def test_validity_period(pk, when, text):
    crt = pk.ca.issue(pk.skey, "localhost", "DNS:localhost", start=when[0], end=when[1])
    rc, out = start_fail("--certs_dir", mkdir(pk, "server", crt=crt))
    assert rc == 1
    assert f"TLS set-up failed: {pk.root}/server{pk.n}/server.crt: Server {text}" in out
    crt = pk.ca.issue(pk.ckey, "dyno", client=True, start=when[0], end=when[1])
    r = dyno(certs=mkdir(pk, "client", crt=crt), port=1)
    assert r.returncode == 1
    assert r.stderr == f"{pk.root}/client{pk.n}/client.crt: Client {text}\n"


def test_2048_bit_key_refused_at_startup(pk):
    crt = pk.ca.issue(pk.k2048, "localhost", "DNS:localhost")
    rc, out = start_fail("--certs_dir", mkdir(pk, "server", crt=crt, key=pk.k2048))
    assert rc == 1
    assert "server.crt: RSA key length 2048 bits is less than required 3072 bits" in out
    assert "Listening to connections" not in out
    crt = pk.ca.issue(pk.k2048, "dyno", client=True)
    r = dyno(certs=mkdir(pk, "client", crt=crt, key=pk.k2048), port=1)
    assert r.returncode == 1 and r.stderr.endswith(
        "client.crt: RSA key length 2048 bits is less than required 3072 bits\n"), r.stderr


def test_sha1_signature_refused(pk):
    crt = pk.ca.issue(pk.skey, "localhost", "DNS:localhost", md="sha1")
    rc, out = start_fail("--certs_dir", mkdir(pk, "server", crt=crt))
    assert rc == 1
    assert "server.crt: Certificate uses insecure signature algorithm: 65 (sha1WithRSAEncryption)" in out
    crt = pk.ca.issue(pk.ckey, "dyno", client=True, md="sha1")
    r = dyno(certs=mkdir(pk, "client", crt=crt), port=1)
    assert r.returncode == 1 and "insecure signature algorithm: 65" in r.stderr


def test_server_cert_rules(pk):
    """The other docs/design/rpc.md#daemon-certificates rows: not a CA, key usage present, key matches."""
    crt = pk.ca.issue(pk.skey, "localhost", "DNS:localhost", ca=True)
    rc, out = start_fail("--certs_dir", mkdir(pk, "server", crt=crt))
    assert rc == 1 and "Server certificate must not be a CA" in out
    crt = pk.ca.issue(pk.skey, "localhost", "DNS:localhost", ku=False)
    rc, out = start_fail("--certs_dir", mkdir(pk, "server", crt=crt))
    assert rc == 1 and "Server certificate must have key usage extension" in out
    rc, out = start_fail("--certs_dir", mkdir(pk, "server", key=pk.ckey))
    assert rc == 1 and "server.key: the key does not match" in out
    rc, out = start_fail("--certs_dir", "/nonexistent")
    assert rc == 1 and "--certs-dir must be a valid directory!" in out


def test_missing_client_certificate(pk, tls_daemon):
    d = tls_daemon()
    # a TLS client without a certificate: mutual TLS is mandatory
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(pk.ca.crt)
    with socket.create_connection(("127.0.0.1", d.port)) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                s.sendall(frame('{"fn":"getStatus"}'))
                if not s.recv(4):
                    raise ConnectionError("closed")
    d.wait_log("tls: handshake with ")
    # dyno with a directory lacking client.crt fails before connecting, naming the file
    cdir = mkdir(pk, "client")
    os.unlink(os.path.join(cdir, "client.crt"))
    r = dyno(certs=cdir, port=d.port)
    assert r.returncode == 1
    assert r.stderr == f"{cdir}/client.crt: cannot open: No such file or directory\n"
    assert_served(d, pk)


def test_revoked_by_crl(pk, tls_daemon):
    revoked = pk.ca.issue(pk.ckey, "dyno-revoked", client=True)
    pk.ca.revoke(revoked)
    crl = pk.ca.crl()
    d = tls_daemon(mkdir(pk, "server", crl=crl))
    # the daemon checks the client chain against ca.crl
    r = dyno(certs=mkdir(pk, "client", crt=revoked), port=d.port)
    assert r.returncode == 1
    assert "revoked" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    d.wait_log("certificate revoked")
    assert_served(d, pk)
    # dyno checks its own certificate against its ca.crl before connecting
    cdir = mkdir(pk, "client", crt=revoked, crl=crl)
    r = dyno(certs=cdir, port=d.port)
    assert r.returncode == 1
    assert f"Checking CRL file: {cdir}/ca.crl" in r.stdout
    assert r.stderr == f"{cdir}/client.crt: Certificate is revoked\n"
    # a revoked server certificate stops the daemon at start-up
    srv = pk.ca.issue(pk.skey, "localhost", "DNS:localhost")
    pk.ca.revoke(srv)
    rc, out = start_fail("--certs_dir", mkdir(pk, "server", crt=srv, crl=pk.ca.crl()))
    assert rc == 1 and "server.crt: Server certificate is revoked" in out


def test_hostname_mismatch(pk, tls_daemon):
    crt = pk.ca.issue(pk.skey, "elsewhere", "DNS:elsewhere.example")
    d = tls_daemon(mkdir(pk, "server", crt=crt))
    cdir = mkdir(pk, "client")
    r = dyno(certs=cdir, port=d.port, host="localhost")
    assert r.returncode == 1
    assert r.stderr == ("TLS handshake with localhost failed: server certificate rejected: "
                        "hostname mismatch\n") or "mismatch" in r.stderr, r.stderr
    r = dyno(certs=cdir, port=d.port, host="127.0.0.1")
    assert r.returncode == 1 and "IP address mismatch" in r.stderr, r.stderr


def test_encrypted_key_passphrase_file(pk, tls_daemon):
    enc = pki.encrypt_key(pk.skey, os.path.join(pk.root, "server-enc.key"), PASS)
    sdir = mkdir(pk, "server", key=enc)
    pf = os.path.join(pk.root, "pass.txt")
    with open(pf, "w") as f:
        f.write(PASS + "\n")
    os.chmod(pf, 0o600)
    d = tls_daemon(sdir, ["--certs_passphrase_file", pf])
    assert_served(d, pk)
    # client side: an encrypted client.key with dyno's passphrase file
    cenc = pki.encrypt_key(pk.ckey, os.path.join(pk.root, "client-enc.key"), PASS)
    cdir = mkdir(pk, "client", key=cenc)
    r = subprocess.run([binpath("dyno"), "--certs-dir", cdir, "--certs-passphrase-file", pf,
                        "--port", str(d.port), "status"], capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL, start_new_session=True)
    assert r.returncode == 0, r.stderr
    # no terminal, no file: the spec's message; readable by others: refused; wrong passphrase
    rc, out = start_fail("--certs_dir", sdir)
    assert rc == 1 and "encrypted server key requires an interactive terminal" in out
    os.chmod(pf, 0o644)
    rc, out = start_fail("--certs_dir", sdir, "--certs_passphrase_file", pf)
    assert rc == 1 and f"{pf}: passphrase file mode 0644 lets group/others access it (chmod 600)" in out
    os.chmod(pf, 0o600)
    link = pf + ".lnk"
    os.symlink(pf, link)
    rc, out = start_fail("--certs_dir", sdir, "--certs_passphrase_file", link)
    assert rc == 1 and "it is a symbolic link" in out
    with open(pf, "w") as f:
        f.write("wrong\n")
    rc, out = start_fail("--certs_dir", sdir, "--certs_passphrase_file", pf)
    assert rc == 1 and "server.key: cannot load the key" in out and "(wrong passphrase?)" in out


def pty_run(argv, answer, until=None):
    """Run argv on a new pseudo-terminal (its controlling terminal) and type `answer` after the
    password prompt. Returns (exit code, terminal text, prompts seen); with `until`, stops
    reading once that text shows and returns (pid, pty fd, text) with the process running."""
    import pty
    prompt = b"Please enter the certificate password: "
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(argv[0], argv)
    out = bytearray()

    def read_until(done):
        while not done():
            try:
                c = os.read(fd, 4096)
            except OSError:   # EIO: the child closed the terminal (exited)
                return
            if not c:
                return
            out.extend(c)
    try:
        read_until(lambda: prompt in out)
        os.write(fd, answer)
        if until is not None:
            read_until(lambda: until.encode() in out)
            return pid, fd, out.decode(errors="replace")
        read_until(lambda: False)
    except BaseException:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)
        raise
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace"), out.count(prompt)


def test_encrypted_key_terminal_prompt(pk, tls_daemon):
    """docs/design/rpc.md#cli-certificates: dyno asks on the terminal, echo off, one '*' per character, DEL erases; with three
    hosts the key is decrypted once (one prompt)."""
    d = tls_daemon()
    cenc = pki.encrypt_key(pk.ckey, os.path.join(pk.root, "client-enc2.key"), PASS)
    cdir = mkdir(pk, "client", key=cenc)
    rc, text, prompts = pty_run([binpath("dyno"), "--certs-dir", cdir, "--port", str(d.port),
                                 "--hostname", "localhost,127.0.0.1,[::1]", "status"],
                                (PASS + "x\x7f\r").encode())
    assert rc == 0, text
    assert prompts == 1
    assert PASS not in text                      # no echo
    assert "*" * (len(PASS) + 1) + "\b \b" in text
    assert "Summary: 3 hosts, 3 succeeded, 0 failed" in text


def test_daemon_prompts_for_encrypted_server_key(pk):
    """docs/design/rpc.md#daemon-certificates: the daemon asks on its controlling terminal; a wrong password is a start-up error."""
    enc = pki.encrypt_key(pk.skey, os.path.join(pk.root, "server-enc3.key"), PASS)
    sdir = mkdir(pk, "server", key=enc)
    sock = tempfile.mkdtemp(prefix="mmd", dir="/tmp")
    port = str(__import__("conftest").free_port())
    argv = [binpath("dynolog"), "--port", port, "--ipc_socket_dir", sock, "--certs_dir", sdir]
    pid, fd, text = pty_run(argv, (PASS + "\r").encode(), until="Listening to connections")
    try:
        assert "Listening to connections" in text, text
        assert PASS not in text
        r = dyno(certs=mkdir(pk, "client"), port=port)
        assert r.returncode == 0, r.stderr
    finally:
        os.kill(pid, 15)
        os.waitpid(pid, 0)
        os.close(fd)
    rc, text, _ = pty_run(argv, b"wrong\r")
    assert rc == 1 and "server.key: cannot load the key" in text, text


def test_plain_dyno_vs_tls_daemon_and_back(pk, tls_daemon):
    d = tls_daemon()
    r = dyno(port=d.port)
    assert r.returncode == 1
    assert r.stderr == "The server answered with TLS: it requires mutual TLS (dyno --certs-dir DIR)\n"
    d.wait_log("failed: not TLS (first byte 0x12; a plain-TCP dyno without --certs-dir?)")
    assert_served(d, pk)
    plain = Daemon()
    try:
        r = dyno(certs=mkdir(pk, "client"), port=plain.port)
        assert r.returncode == 1
        assert r.stderr == ("TLS handshake with localhost failed: the server closed the connection "
                            "(is it a plain-TCP dynolog without --certs_dir?)\n"), r.stderr
        plain.wait_log("Invalid message size")
        r = dyno(port=plain.port)
        assert r.returncode == 0, r.stderr
    finally:
        plain.stop()


def test_stalled_handshakes_do_not_delay_a_client(pk, tls_daemon):
    d = tls_daemon()
    stalled = []
    try:
        for i in range(20):
            # each from its own loopback address (127.0.0.2 ...), so a per-peer connection cap
            # counts them neither against each other nor against the real client; each sends
            # half a ClientHello record header and stops
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((f"127.0.0.{2 + i}", 0))
            s.connect(("127.0.0.1", d.port))
            s.sendall(b"\x16\x03\x01")
            stalled.append(s)
        for i in range(20):
            d.wait_log(f"Received connection from ::ffff:127.0.0.{2 + i}\n")
        r = dyno(certs=mkdir(pk, "client"), port=d.port)
        assert r.returncode == 0, r.stderr
        # the real client was answered while every stalled handshake was still open
        for s in stalled:
            s.setblocking(False)
            with pytest.raises(BlockingIOError):
                s.recv(1)
        # and the deadline ends them
        for s in stalled:
            s.setblocking(True)
            s.settimeout(30)
            try:
                assert s.recv(1) == b""
            except ConnectionResetError:
                pass
    finally:
        for s in stalled:
            s.close()
    assert_served(d, pk)


def test_tls_1_1_refused(pk, tls_daemon):
    """TLS 1.2 is the minimum (docs/design/rpc.md#mutual-tls): a client offering only TLS 1.1 is refused."""
    d = tls_daemon()
    cdir = mkdir(pk, "client")
    p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{d.port}", "-tls1_1",
                        "-cipher", "DEFAULT@SECLEVEL=0", "-cert", os.path.join(cdir, "client.crt"),
                        "-key", os.path.join(cdir, "client.key"), "-CAfile", pk.ca.crt],
                       input="", capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    d.wait_log("tls: handshake with ")
    assert "unsupported protocol" in d.log() or "version" in d.log(), d.log()[-2000:]
    assert_served(d, pk)
