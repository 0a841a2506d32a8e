#!/usr/bin/env python3
"""Writes the binary and certificate seeds of tests/fuzz/corpus/ (the text seeds are the
targets' built-in fuzz_seeds, written with `<target> --write-seeds DIR`). Run from the repo
root; needs the openssl CLI. Certificates are made once and committed: the fuzz target checks
them at a fixed "now" (2030-01-01) inside their validity (2020..2040)."""
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import tls_pki as pki  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def frame(body):
    return struct.pack("<i", len(body)) + body


def rpc_frames():
    t = "fuzz_rpc_frame"
    put(t, "getstatus", frame(b'{"fn":"getStatus"}'))
    put(t, "getversion", frame(b'{"fn":"getVersion"}'))
    put(t, "setconfig", frame(b'{"fn":"setKinetOnDemandRequest","config":"NPU_MONITOR_START=true\\n'
                              b'MSPTI_ACTIVITY_KIND=Kernel","pids":[0],"job_id":0,"process_limit":3}'))
    put(t, "nputrace", frame(b'{"fn":"setKinetOnDemandRequest","config":"PROFILE_START_STEP=2\\n'
                             b'ACTIVITIES_ITERATIONS=1","pids":[12,13],"job_id":7,"process_limit":1}'))
    put(t, "short_body", struct.pack("<i", 100) + b'{"fn":')
    put(t, "negative_len", struct.pack("<i", -1) + b"{}")
    put(t, "max_len", struct.pack("<i", 8191) + b"{" + b" " * 8189 + b"}")
    put(t, "tls_hello", b"\x16\x03\x01\x00\x2a\x01\x00\x00\x26\x03\x03")
    put(t, "deep", frame(b"[" * 12 + b"]" * 12))
    put(t, "log_injection", frame(b'{"fn":"x\\n","y":"E1201 forged line\\n"}'))


def ipc(type_, payload):
    return struct.pack("<Q32s", len(payload), type_.encode()) + payload


def ipc_msgs():
    t = "fuzz_ipc_msg"
    put(t, "ctxt", ipc("ctxt", struct.pack("<iiq", 0, 1234, 7)))
    put(t, "req", ipc("req", struct.pack("<iiq", 2, 3, 7) + struct.pack("<iii", 1234, 1000, 1)))
    put(t, "req_too_many", ipc("req", struct.pack("<iiq", 2, 99, 7) + struct.pack("<i", 5)))
    put(t, "trace_status", ipc("npuTraceStatus", struct.pack("<iiiiiiq", 1, 5, 3, 9, 1234, 0, 7)))
    put(t, "monitor_status", ipc("npuMonitorStatus", struct.pack("<iiiiiiq", 2, -1, -1, -1, 1234, 0, 7)))
    put(t, "data", ipc("data", b'{"kind":"Kernel","deviceId":0,"duration":5,"timestamp":1}'))
    put(t, "size_lies", struct.pack("<Q32s", 1 << 40, b"data") + b"{}")


def certs():
    t = "fuzz_tls_check"
    root = tempfile.mkdtemp(prefix="fuzzpki")
    ca = pki.CA(root, "fuzz-ca")
    k = pki.rsa_key(os.path.join(root, "k.key"))
    k2 = pki.rsa_key(os.path.join(root, "k2.key"), 2048)
    span = dict(start="20200101000000Z", end="20400101000000Z")
    good = ca.issue(k, "localhost", "DNS:localhost,IP:127.0.0.1", **span)
    client = ca.issue(k, "dyno", client=True, **span)
    expired = ca.issue(k, "old", "DNS:old", start="20200101000000Z", end="20210101000000Z")
    sha1 = ca.issue(k, "sha1", "DNS:sha1", md="sha1", **span)
    small = ca.issue(k2, "small", "DNS:small", **span)
    noku = ca.issue(k, "noku", "DNS:noku", ku=False, **span)
    isca = ca.issue(k, "isca", "DNS:isca", ca=True, **span)
    ca.revoke(client)
    crl = ca.crl()
    rd = lambda p: open(p, "rb").read()  # noqa: E731
    for name, p in [("server", good), ("client", client), ("expired", expired), ("sha1", sha1),
                    ("rsa2048", small), ("no_key_usage", noku), ("leaf_is_ca", isca), ("ca", ca.crt)]:
        put(t, "pem_" + name, b"P" + rd(p))
        der = subprocess.run(["openssl", "x509", "-in", p, "-outform", "DER"], check=True,
                             capture_output=True).stdout
        put(t, "der_" + name, b"D" + der)
    put(t, "pem_chain", b"P" + rd(good) + rd(ca.crt))
    put(t, "crl_with_certs", b"L" + rd(crl) + rd(client) + rd(good))
    der = subprocess.run(["openssl", "crl", "-in", crl, "-outform", "DER"], check=True,
                         capture_output=True).stdout
    put(t, "der_crl", b"R" + der)


if __name__ == "__main__":
    rpc_frames()
    ipc_msgs()
    certs()
