"""A small test client for dynolog's IPC protocol (spec docs/design/ipc.md#datagrams): binds the abstract
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


# --- PyTorch Kineto's dynolog client (spec docs/design/daemon.md#kineto-clients, docs/design/ipc.md#kineto-endpoint, #datagrams) ---

KINETO_DEST = b"\0dynolog\0"          # abstract, trailing NUL part of the name: addrlen 11
KINETO_NONE, KINETO_EVENTS, KINETO_ACTIVITIES = 0, 1, 2


def kineto_pids(pid=None):
    """Own pid, then up to 10 ancestors from /proc/<pid>/stat, stopping before pid <= 1."""
    pids = [pid or os.getpid()]
    while len(pids) < 11:
        try:
            with open("/proc/%d/stat" % pids[-1]) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if ppid <= 1:
            break
        pids.append(ppid)
    return pids


def kineto_log_file(log_file, pid):
    """Kineto's per-process output name: x.pt.trace.json -> x_<pid>.pt.trace.json, else the
    first .json -> _<pid>.json."""
    if log_file.endswith(".pt.trace.json"):
        return log_file[:-len(".pt.trace.json")] + "_%d.pt.trace.json" % pid
    return log_file.replace(".json", "_%d.json" % pid, 1)


def parse_kineto_config(text):
    """Kineto's parser: strip # comments, skip blank lines, exactly two trimmed parts split on
    '=' or the whole config is rejected (ValueError)."""
    out = {}
    for line in text.split("\n"):
        line = line.split("#", 1)[0]
        if not line.strip():
            continue
        parts = line.split("=")
        if len(parts) != 2:
            raise ValueError("Kineto rejects config line %r" % line)
        out[parts[0].strip()] = parts[1].strip()
    return out


class KinetoClient:
    """What libkineto's IpcFabricConfigClient puts on the wire: bound once to the abstract
    name dynoconfigclient<uuid4> (with Kineto's trailing NUL), each message one sendmsg of two
    iovecs (40-byte metadata, payload) to @dynolog; ctxt {gpu, pid, jobId}; req {type, n,
    jobId, pids[n]} with pids = own pid + ancestors and jobId = SLURM_JOB_ID or 0."""

    def __init__(self, job=None, pids=None, dest=KINETO_DEST, kdir=None):
        """kdir: Kineto's KINETO_IPC_SOCKET_DIR mode, where both ends are files in that directory
        (<kdir>/dynoconfigclient<uuid4> and <kdir>/dynolog): what reaches a daemon in another
        network namespace (docs/deploy.md#kineto)."""
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.name = "dynoconfigclient" + str(uuid.uuid4())
        self.path = None
        if kdir:
            self.path = os.path.join(kdir, self.name)
            self.sock.bind(self.path)
            dest = os.path.join(kdir, "dynolog")
        else:
            self.sock.bind(b"\0" + self.name.encode() + b"\0")
        self.dest = dest
        self.pid = os.getpid()
        self.pids = list(pids) if pids is not None else kineto_pids()
        if job is None:
            try:
                job = int(os.environ.get("SLURM_JOB_ID", "0"))
            except ValueError:
                job = 0
        self.job = job

    def close(self):
        self.sock.close()
        if self.path:
            try:
                os.unlink(self.path)
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, tag, payload):
        hdr = HDR.pack(len(payload), tag.encode().ljust(32, b"\0"))
        self.sock.sendmsg([hdr, payload], [], 0, self.dest)

    def recv(self, timeout):
        """(tag, payload, source address) or None."""
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            return None
        d, src = self.sock.recvfrom(70000)
        tag, payload = parse(d)
        return tag, payload, src

    def ctxt(self, gpu, timeout=1.0):
        self.send("ctxt", struct.pack("<iiq", gpu, self.pid, self.job))
        r = self.recv(timeout)
        return None if r is None else struct.unpack("<i", r[1][:4])[0]

    def req_payload(self, type):
        return struct.pack("<iiq", type, len(self.pids), self.job) + \
            struct.pack("<%di" % len(self.pids), *self.pids)

    def poll(self, type=KINETO_ACTIVITIES, timeout=0.09):
        """One poll like Kineto's: send req, wait ~90 ms for the reply. Returns
        (config text, reply source address) or None."""
        self.send("req", self.req_payload(type))
        r = self.recv(timeout)
        if r is None:
            return None
        return r[1].decode("utf-8", "replace"), r[2]
