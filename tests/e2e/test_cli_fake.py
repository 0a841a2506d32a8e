"""dyno against fake RPC servers written here (framing of docs/design/rpc.md#framing): exact request
bytes, output lines for fixed replies, no connection on validation errors, multi-host
fan-out with a silent server, unreachable and closed-without-reply failures."""
import os
import re
import socket
import struct
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import binpath
from waits import wait_until

ROOT_WARN = ("Security Warning: Do not run this tool as root. Running with elevated privileges "
             "may compromise system security. Use a regular user account.")


class FakeServer:
    """Accepts connections, records each framed request, then per `mode`:
    'reply' sends `reply` framed, 'close' closes without reply, 'silent' holds the
    connection open until the server stops."""

    def __init__(self, reply=b'{"version":"0.3.2"}', mode="reply", host="127.0.0.1", port=0,
                 family=socket.AF_INET, path=None, barrier=None):
        self.barrier = barrier
        self.reply = reply if isinstance(reply, bytes) else reply.encode()
        self.mode = mode
        self.requests = []
        self.connections = 0
        self.held = []
        self.stopping = threading.Event()
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        if family == socket.AF_UNIX:
            self.sock.bind(path)
        else:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind((host, port))
            self.port = self.sock.getsockname()[1]
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _recv_exact(self, c, n):
        data = b""
        while len(data) < n:
            chunk = c.recv(n - len(data))
            if not chunk:
                break
            data += chunk
        return data

    def _run(self):
        while not self.stopping.is_set():
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.connections += 1
            c.settimeout(5)
            head = self._recv_exact(c, 4)
            body = b""
            if len(head) == 4:
                body = self._recv_exact(c, struct.unpack("<i", head)[0])
            self.requests.append(head + body)
            if self.barrier is not None:
                # Reply only once every server of the barrier holds a request: a client
                # that contacts the hosts one after another never gets past the first.
                try:
                    self.barrier.wait(timeout=20)
                except threading.BrokenBarrierError:
                    c.close()
                    continue
            if self.mode == "reply":
                c.sendall(struct.pack("<I", len(self.reply)) + self.reply)
                c.close()
            elif self.mode == "close":
                c.close()
            else:
                self.held.append(c)

    def stop(self):
        self.stopping.set()
        self.thread.join()
        for c in self.held:
            c.close()
        self.sock.close()


@pytest.fixture
def servers():
    made = []

    def _make(*args, **kw):
        s = FakeServer(*args, **kw)
        made.append(s)
        return s

    yield _make
    for s in made:
        s.stop()


def _connections_before_probe(s):
    """Connections `s` accepted before a probe of ours (an empty frame, which dyno never sends):
    the listen queue is FIFO, so once the probe is served any connection dyno made is counted."""
    with socket.create_connection(("127.0.0.1", s.port)) as c:
        c.sendall(struct.pack("<i", 0))
        wait_until(lambda: struct.pack("<i", 0) in s.requests, 30, "the probe connection to be served")
    return s.connections - 1


def dyno(*args, env=None, timeout=60):
    return subprocess.run([binpath("dyno"), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def lines(out):
    """stdout lines without the root warning (the tests may run as root)."""
    return [l for l in out.split("\n") if l != ROOT_WARN]


def test_status_request_bytes_and_output(servers):
    reply = '{"current_step":-1,"npumonitor":"Idle","nputrace":"Idle","processes":[]}'
    s = servers(reply)
    r = dyno("--hostname", "127.0.0.1", "--port", str(s.port), "status")
    assert r.returncode == 0, r.stderr
    assert s.requests == [b"\x12\x00\x00\x00" + b'{"fn":"getStatus"}']
    assert lines(r.stdout) == ["Running in no-certificate mode", reply, ""]
    assert r.stderr == ""


def test_version_request_bytes(servers):
    s = servers('{"version":"0.3.2"}')
    r = dyno("--hostname", "127.0.0.1", "--port", str(s.port), "version")
    assert r.returncode == 0
    assert s.requests == [b"\x13\x00\x00\x00" + b'{"fn":"getVersion"}']
    assert lines(r.stdout)[-2] == '{"version":"0.3.2"}'


def test_reply_of_789_bytes_is_not_tls(servers):
    """A plain reply whose little-endian length starts 15 03 (789 bytes) is a reply, not a
    TLS alert from a TLS daemon (found by bench_loop: 8 outcomes are about that long)."""
    reply = '{"version":"' + "v" * (789 - len('{"version":""}')) + '"}'
    assert len(reply) == 789
    s = servers(reply)
    r = dyno("--hostname", "127.0.0.1", "--port", str(s.port), "version")
    assert r.returncode == 0, r.stderr
    assert lines(r.stdout)[-2] == reply


def test_npu_monitor_output_and_note(servers):
    s = servers('{"commandStatus":"ineffective"}')
    r = dyno("--hostname", "localhost", "--port", str(s.port), "npu-monitor",
             "--npu-monitor-start", "--duration", "0.5", "--filter", "Kernel:MatMul")
    assert r.returncode == 5, r.stderr   # ineffective: reached no process
    assert lines(r.stdout) == [
        "Running in no-certificate mode",
        "Npu monitor config = ",
        "NPU_MONITOR_START=true", "NPU_MONITOR_STOP=false", "REPORT_INTERVAL_S=60",
        "DURATION=0.5", "MSPTI_ACTIVITY_KIND=Marker", "NPU_MONITOR_LOG_FILE=",
        "NPU_MONITOR_EXPORT_TYPE=DB", "JSONL_ROTATE_LOG_LINES=", "JSONL_ROTATE_LOG_FILES=",
        "NPU_MONITOR_FILTER=Kernel:MatMul",
        'response = {"commandStatus":"ineffective"}',
        "Note: command not applied (ineffective); npu-monitor and nputrace cannot run at the "
        "same time and a training process must be registered - see 'dyno status'",
        ""]
    body = s.requests[0][4:]
    assert struct.unpack("<i", s.requests[0][:4])[0] == len(body)
    assert body.startswith(b'\n{\n    "fn": "setKinetOnDemandRequest",\n    "config": "NPU_MONITOR_START=true\\n')
    # every matching process by default (issue 22), and the token the outcomes are read with
    assert re.search(rb'",\n    "job_id": 0,\n    "pids": \[0\],\n    "process_limit": 4096,\n'
                     rb'    "client_token": "[0-9a-f]{16}"\n}$', body), body


def test_npu_monitor_log_file_hints_at_the_report(servers, tmp_path):
    """Issue 17: a start that writes files on the node points at `msmonitor report`; a stop,
    or a start without --log-file, does not."""
    s = servers('{"commandStatus":"effective"}')
    hint = f"Hint: once the session has stopped, `python3 -m msmonitor report {tmp_path}` on the node"
    r = dyno("--port", str(s.port), "npu-monitor", "--npu-monitor-start", "--log-file", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert [l for l in lines(r.stdout) if l.startswith("Hint:")] == [
        hint + " renders its files as one HTML page (docs/report.md)"]
    for args in (["--npu-monitor-stop", "--log-file", str(tmp_path)], ["--npu-monitor-start"]):
        r = dyno("--port", str(s.port), "npu-monitor", *args)
        assert r.returncode == 0, r.stderr
        assert "Hint:" not in r.stdout


def test_nputrace_matched_lines(servers, tmp_path):
    reply = ('{"activityProfilersBusy":0,"activityProfilersTriggered":[11,22],'
             '"commandStatus":"effective","eventProfilersBusy":0,"eventProfilersTriggered":[],'
             '"processesMatched":[11,22]}')
    s = servers(reply)
    r = dyno("--port", str(s.port), "nputrace", "--log-file", str(tmp_path), "--iterations", "3",
             "--start-step", "-1", "--pids", "11, 22", "--job-id", "5")
    assert r.returncode == 0, r.stderr
    out = lines(r.stdout)
    i = out.index("response = " + reply)
    assert out[i + 1:] == ["Matched 2 processes", "Trace output files will be written to:",
                           "    " + str(tmp_path), "    " + str(tmp_path), ""]
    assert b'"job_id": 5,\n    "pids": [11,22],' in s.requests[0]


def test_nputrace_no_match_exits_5(servers, tmp_path):
    """No process matched: the command reached nobody, a refusal a script must see (exit 5)."""
    s = servers('{"commandStatus":"unknown","processesMatched":[]}')
    r = dyno("--port", str(s.port), "nputrace", "--log-file", str(tmp_path), "--iterations", "1",
             "--start-step", "0")
    assert r.returncode == 5
    out = lines(r.stdout)
    assert "No processes were matched, please check --job-id or --pids flags" in out
    assert out[-2].startswith("Note: command not applied (unknown);")


def test_gputrace_output(servers):
    s = servers('{"processesMatched":[7]}')
    r = dyno("--port", str(s.port), "gputrace", "--log-file", "/tmp/x.pt.trace.json",
             "--profile-memory")
    assert r.returncode == 0, r.stderr
    out = lines(r.stdout)
    i = out.index("response length = 24")
    assert out[i:] == ['response length = 24', 'response = {"processesMatched":[7]}', "",
                       "Matched 1 processes", "Trace output files will be written to:",
                       "    /tmp/x_7.pt.trace.json", "      Or /tmp/memory_snapshot_7.pickle", ""]
    assert "Kineto config = " in out


def test_gputrace_fail_on_no_process(servers):
    s = servers('{"processesMatched":[]}')
    r = dyno("--port", str(s.port), "gputrace", "--log-file", "/tmp/t.json", "--fail-on-no-process")
    assert r.returncode == 1
    assert "No processes were matched, please check --job-id or --pids flags" in r.stdout


@pytest.mark.parametrize("args", [
    ["npu-monitor", "--duration", "-1"],
    ["npu-monitor", "--mspti-activity-kind", "Marker,Bogus"],
    ["npu-monitor", "--filter", "Kernel"],
    ["nputrace", "--log-file", "/tmp", "--iterations", "0", "--start-step", "0"],
    ["nputrace", "--log-file", "/tmp", "--iterations", "1", "--start-step", "0", "--pids", "x"],
    ["status", "--bogus"],
])
def test_validation_error_sends_nothing(servers, args):
    s = servers()
    r = dyno("--port", str(s.port), *args)
    assert r.returncode == 2
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1
    assert _connections_before_probe(s) == 0


def test_unreachable(servers):
    s = servers()
    port = s.port
    s.stop()
    r = dyno("--port", str(port), "status")
    assert r.returncode == 1
    assert r.stderr == "Couldn't connect to the server...: Connection refused\n"


def test_closed_without_reply(servers):
    s = servers(mode="close")
    r = dyno("--port", str(s.port), "status")
    assert r.returncode == 1
    assert r.stderr == ("No reply from the server (the request may be unknown to this dynolog "
                        "version)\n")


def test_unparsable_reply(servers):
    s = servers("not json")
    r = dyno("--port", str(s.port), "version")
    assert r.returncode == 1
    assert r.stderr.startswith("Unparsable reply from the server")


def test_fanout_ordered_summary_one_silent(servers):
    a = servers('{"version":"A"}', host="127.0.0.1")
    servers(mode="silent", host="127.0.0.2", port=a.port)
    servers('{"version":"C"}', host="127.0.0.3", port=a.port)
    t0 = time.monotonic()
    r = dyno("--hostname", "127.0.0.[1-3]", "--port", str(a.port), "--timeout-s", "2", "version")
    elapsed = time.monotonic() - t0
    assert r.returncode == 1
    assert lines(r.stdout) == [
        "Running in no-certificate mode",
        '[127.0.0.1] {"version":"A"}',
        "[127.0.0.2] ERROR: Timed out after 2 s waiting for the reply",
        '[127.0.0.3] {"version":"C"}',
        "Summary: 3 hosts, 2 succeeded, 1 failed",
        ""]
    assert r.stderr == ""
    assert elapsed >= 2


def test_fanout_hosts_are_contacted_concurrently(servers):
    # Deterministic, no clock: each server answers only after all three hold a request,
    # so the run succeeds only if dyno has the three connections open at the same time.
    barrier = threading.Barrier(3)
    a = servers('{"version":"A"}', host="127.0.0.1", barrier=barrier)
    servers('{"version":"B"}', host="127.0.0.2", port=a.port, barrier=barrier)
    servers('{"version":"C"}', host="127.0.0.3", port=a.port, barrier=barrier)
    r = dyno("--hostname", "127.0.0.1,127.0.0.2,127.0.0.3", "--port", str(a.port),
             "--parallel", "3", "version")
    assert r.returncode == 0, r.stdout + r.stderr
    assert lines(r.stdout)[-5:] == [
        '[127.0.0.1] {"version":"A"}',
        '[127.0.0.2] {"version":"B"}',
        '[127.0.0.3] {"version":"C"}',
        "Summary: 3 hosts, 3 succeeded, 0 failed",
        ""]


def test_hostfile_and_npu_monitor_prefixes(servers, tmp_path):
    a = servers('{"commandStatus":"effective","processesMatched":[1]}', host="127.0.0.1")
    servers('{"commandStatus":"ineffective"}', host="127.0.0.2", port=a.port)
    hf = tmp_path / "hosts"
    hf.write_text("# nodes\n127.0.0.2\n\n127.0.0.1  # dup\n")
    r = dyno("--hostname", "127.0.0.1", "--hostfile", str(hf), "--port", str(a.port),
             "npu-monitor", "--npu-monitor-stop")
    assert r.returncode == 5, r.stdout + r.stderr   # both replied, one was ineffective
    out = lines(r.stdout)
    assert out.count("Npu monitor config = ") == 1
    tail = out[out.index("NPU_MONITOR_FILTER=") + 1:]
    assert tail == [
        '[127.0.0.1] response = {"commandStatus":"effective","processesMatched":[1]}',
        '[127.0.0.2] response = {"commandStatus":"ineffective"}',
        "[127.0.0.2] Note: command not applied (ineffective); npu-monitor and nputrace cannot "
        "run at the same time and a training process must be registered - see 'dyno status'",
        "Summary: 2 hosts, 2 succeeded, 0 failed",
        ""]


def test_unix_target_default_and_path(servers):
    d = tempfile.mkdtemp(prefix="mmcli", dir="/tmp")
    path = os.path.join(d, "dyno.sock")
    s = servers('{"version":"U"}', family=socket.AF_UNIX, path=path)
    env = dict(os.environ, MSMONITOR_SOCKET_DIR=d)
    r = dyno("--hostname", "unix:", "version", env=env)
    assert r.returncode == 0, r.stderr
    assert lines(r.stdout)[-2] == '{"version":"U"}'
    r = dyno("--hostname", "unix:" + path, "status")
    assert r.returncode == 0, r.stderr
    assert s.requests[1] == b"\x12\x00\x00\x00" + b'{"fn":"getStatus"}'
    s.stop()
    os.unlink(path)
    os.rmdir(d)


def test_certs_dir(tmp_path, servers):
    s = servers()
    r = dyno("--certs-dir", "/nonexistent/certs", "--port", str(s.port), "status")
    assert r.returncode == 2
    assert r.stderr == "--certs-dir must be a valid directory!\n"
    r = dyno("--certs-dir", str(tmp_path), "--port", str(s.port), "status")
    assert r.returncode == 1
    assert "Running in certificate mode" in r.stdout
    # an empty directory: the first docs/design/rpc.md#cli-certificates file is missing, nothing is sent (test_tls.py: the rest)
    assert r.stderr == f"{tmp_path}/ca.crt: cannot open: No such file or directory\n"
    assert s.connections == 0


def test_version_flag_and_help():
    r = dyno("--version")
    assert r.returncode == 0 and r.stdout.startswith("dyno ")
    r = dyno("npu-monitor", "--help")
    assert r.returncode == 0 and "--mspti-activity-kind" in r.stdout
    r = dyno()
    assert r.returncode == 2 and "subcommand is required" in r.stderr
