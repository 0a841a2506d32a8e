"""A small test client for dynolog's IPC protocol (spec 03-ipc.md §2): binds the abstract
name dynoconfigclient<uuid4> like the plugin does, sends ctxt / req / status / data
datagrams to <sockdir>/dynolog.sock (or dynolog_data.sock) and receives replies.

    c = IpcClient(sockdir)
    c.register(npu=0)                 # ctxt -> int count (or None)
    cfg = c.poll()                    # req  -> config text (str), '' or None on timeout
    c.status("monitor", 1)            # npuMonitorStatus Running
    c.data({"kind": "Kernel", ...})   # data datagram
"""
import json
import os
import select
import socket
import struct
import uuid

HDR = struct.Struct("<Q32s")
STATUS = {"Uninitialized": -1, "Idle": 0, "Running": 1, "Ready": 2}


def build(tag, payload):
    """One datagram: 40-byte header (size, NUL-padded tag) + payload."""
    t = tag.encode() if isinstance(tag, str) else tag
    return HDR.pack(len(payload), t.ljust(32, b"\0")[:32]) + payload


def parse(dgram):
    """(tag, payload) of a received datagram."""
    size, tag = HDR.unpack_from(dgram)
    return tag.split(b"\0", 1)[0].decode(), dgram[HDR.size:HDR.size + size]


class IpcClient:
    def __init__(self, sockdir, name=None, abstract=True, dest="dynolog.sock"):
        self.sockdir = sockdir
        self.dest = os.path.join(sockdir, dest)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.name = name or "dynoconfigclient" + str(uuid.uuid4())
        if abstract:
            self.sock.bind("\0" + self.name)
        self.pid = os.getpid()

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send_raw(self, data, dest=None):
        """Send bytes as one datagram to dest (default <sockdir>/dynolog.sock)."""
        self.sock.sendto(data, dest or self.dest)

    def recv(self, timeout=1.0):
        """(tag, payload) of the next datagram, or None on timeout."""
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            return None
        d, _ = self.sock.recvfrom(70000)
        return parse(d)

    def drain(self):
        while self.recv(0) is not None:
            pass

    def register(self, npu, pid=None, job=0, timeout=1.0):
        """ctxt registration; returns the daemon's count or None (refused / no reply)."""
        self.send_raw(build("ctxt", struct.pack("<iiq", npu, pid or self.pid, job)))
        rep = self._wait("ctxt", timeout)
        return None if rep is None else struct.unpack("<i", rep[:4])[0]

    def poll(self, pids=None, job=0, type=3, timeout=1.0):
        """req with the pid list (default [own pid]); returns the config text, '' for an empty
        reply, or None when no reply arrives in time."""
        pids = [self.pid] if pids is None else list(pids)
        payload = struct.pack("<iiq", type, len(pids), job) + struct.pack("<%di" % len(pids), *pids)
        self.send_raw(build("req", payload))
        rep = self._wait("req", timeout)
        return None if rep is None else rep.decode("utf-8", "replace")

    def status(self, kind, status, current_step=-1, start_step=-1, stop_step=-1, pid=None, job=0):
        """npuTraceStatus (kind 'trace') or npuMonitorStatus (kind 'monitor'); no reply."""
        tag = {"trace": "npuTraceStatus", "monitor": "npuMonitorStatus"}[kind]
        st = STATUS.get(status, status) if isinstance(status, str) else status
        payload = struct.pack("<iiiiiiq", st, current_step, start_step, stop_step,
                              pid or self.pid, 0, job)
        self.send_raw(build(tag, payload))

    def data(self, obj, dest=None):
        """A `data` datagram to <sockdir>/dynolog_data.sock (obj: dict or str)."""
        text = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
        self.send_raw(build("data", text.encode()),
                      dest or os.path.join(self.sockdir, "dynolog_data.sock"))

    def _wait(self, tag, timeout):
        while True:
            r = self.recv(timeout)
            if r is None:
                return None
            if r[0] == tag:
                return r[1]
