"""Helpers for the daemon's end-to-end tests: raw framed RPC over TCP or dyno.sock."""
import json
import socket
import struct


def rpc_raw(port=None, payload=b"", unix=None, timeout=5.0, host="127.0.0.1"):
    """Send raw bytes, return everything received until the daemon closes (bytes)."""
    if unix:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(unix)
    else:
        s = socket.create_connection((host, port))
    s.settimeout(timeout)
    try:
        if payload:
            s.sendall(payload)
        out = b""
        while True:
            try:
                c = s.recv(65536)
            except ConnectionResetError:
                break
            if not c:
                break
            out += c
        return out
    finally:
        s.close()


def frame(body):
    if isinstance(body, str):
        body = body.encode()
    return struct.pack("<i", len(body)) + body


def rpc(port, body, **kw):
    """Framed request -> reply body (bytes), b'' when the daemon answered nothing."""
    out = rpc_raw(port, frame(body), **kw)
    if not out:
        return b""
    (n,) = struct.unpack("<i", out[:4])
    assert len(out) == 4 + n, out
    return out[4:]


def rpc_json(port, obj, **kw):
    rep = rpc(port, json.dumps(obj), **kw)
    return json.loads(rep) if rep else None


def set_config(port, config, pids=(0,), job_id=0, limit=3, **kw):
    return rpc_json(port, {"fn": "setKinetOnDemandRequest", "config": config,
                           "pids": list(pids), "job_id": job_id, "process_limit": limit}, **kw)
