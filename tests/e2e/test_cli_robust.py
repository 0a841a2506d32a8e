"""dyno against hostile or broken RPC servers (docs/design/rpc.md#framing, docs/design/cli.md#exit-codes): a reply with
a huge or negative length, garbage, trailing bytes after the JSON, an embedded NUL, a
frame cut off midway, odd processesMatched entries. Each must end in one clear line and
exit 1 (or render safely), never crash or hang past --timeout-s."""
import socket
import struct
import subprocess
import threading

import pytest

from conftest import binpath


class RawServer:
    """Accepts one connection at a time, reads the framed request, writes `payload` raw
    (no framing added) and closes, or with hold=True keeps the connection open until
    stop()."""

    def __init__(self, payload, hold=False, host="127.0.0.1", port=0):
        self.payload = payload
        self.hold = hold
        self.held = []
        self.stopping = threading.Event()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(8)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping.is_set():
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            c.settimeout(5)
            try:
                head = c.recv(4, socket.MSG_WAITALL)
                if len(head) == 4:
                    c.recv(struct.unpack("<i", head)[0], socket.MSG_WAITALL)
                c.sendall(self.payload)
            except OSError:
                pass
            if self.hold:
                self.held.append(c)
            else:
                c.close()

    def stop(self):
        self.stopping.set()
        self.thread.join()
        for c in self.held:
            c.close()
        self.sock.close()


@pytest.fixture
def raw():
    made = []

    def _make(payload, **kw):
        s = RawServer(payload, **kw)
        made.append(s)
        return s

    yield _make
    for s in made:
        s.stop()


def dyno(port, *args):
    # The subprocess timeout only guards against a hang; no test asserts elapsed time.
    return subprocess.run([binpath("dyno"), "--port", str(port), "--timeout-s", "2", *args],
                          capture_output=True, text=True, timeout=60)


def frame(body):
    return struct.pack("<I", len(body)) + body


@pytest.mark.parametrize("payload,want", [
    (struct.pack("<I", 0x7FFFFFFF),
     "Invalid reply length 2147483647 from the server (limit 2097152)\n"),
    (struct.pack("<i", -5), "Invalid reply length -5 from the server (limit 2097152)\n"),
    (struct.pack("<i", 0), "Invalid reply length 0 from the server (limit 2097152)\n"),
    (struct.pack("<I", 100) + b'{"a":', "Truncated reply from the server (5 of 100 bytes)\n"),
    (b"\x07\x00", "Truncated reply from the server (2 of 4 length bytes)\n"),
    (frame(b"not\njson"), "Unparsable reply from the server (8 bytes): not\\x0ajson\n"),
    (frame(b'{"version":"1"}xyz'),
     "Unparsable reply from the server (18 bytes): {\"version\":\"1\"}xyz\n"),
    (frame(b'{"version":"1"}\x00xyz'),
     "Unparsable reply from the server (19 bytes): {\"version\":\"1\"}\\x00xyz\n"),
    (frame(b"x" * 1000),
     "Unparsable reply from the server (1000 bytes): " + "x" * 200 + "...\n"),
])
def test_bad_reply_is_one_line_exit_1(raw, payload, want):
    s = raw(payload)
    r = dyno(s.port, "version")
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr == want
    assert r.stdout.endswith("Running in no-certificate mode\n")


def test_trailing_whitespace_after_json_is_fine(raw):
    s = raw(frame(b'{"version":"1"}\n\t '))
    r = dyno(s.port, "version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.endswith('Running in no-certificate mode\n{"version":"1"}\n\t \n')


def test_length_then_silence_times_out(raw):
    s = raw(struct.pack("<I", 50) + b"{", hold=True)
    r = dyno(s.port, "status")
    assert r.returncode == 1
    assert r.stderr == "Timed out after 2 s waiting for the reply\n"


def test_bad_reply_in_fanout_is_one_prefixed_line(raw):
    good = raw(frame(b'{"version":"1"}'))
    raw(frame(b"oops\nline2"), host="127.0.0.2", port=good.port)
    r = dyno(good.port, "--hostname", "127.0.0.1,127.0.0.2", "version")
    assert r.returncode == 1
    assert r.stdout.split("\n")[-4:] == [
        '[127.0.0.1] {"version":"1"}',
        "[127.0.0.2] ERROR: Unparsable reply from the server (10 bytes): oops\\x0aline2",
        "Summary: 2 hosts, 1 succeeded, 1 failed",
        ""]
    assert r.stderr == ""


def test_hostile_pids_render_without_overflow(raw, tmp_path):
    # 1e300 and -1e300 are out of every integer range: the pid saturates instead of
    # going through an overflowing double-to-integer conversion.
    s = raw(frame(b'{"processesMatched":[1e300,-1e300,"x",12]}'))
    r = dyno(s.port, "gputrace", "--log-file", "/o/t.json")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[-7:] == [
        "Matched 4 processes",
        "Trace output files will be written to:",
        "    /o/t_2147483647.json",
        "    /o/t_-2147483648.json",
        "    /o/t_0.json",
        "    /o/t_12.json",
        ""]
