"""Remote-write push end to end: the real dynolog pushing to the real Prometheus
(--web.enable-remote-write-receiver) — values against the simulator's ground truth, a receiver
outage with the buffered samples delivered after the restart and the drop counter exact —
and misbehaving receivers (400, 500, hang, close mid-body, unresolvable, refused, bad flags)
while the daemon keeps serving RPC and IPC."""
import collections
import hashlib
import os
import re
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import binpath, free_port
from daemon_util import rpc_json
from ipcclient import IpcClient
from prom_util import FakeReceiver, PromServer, decode_write_request, kernel_truth, samples, scrape
from test_prometheus import HOST, _run_job
from waits import wait_until

SUMMARY = re.compile(r"remote write: stopped; produced (\d+) samples, sent (\d+), dropped (\d+) \(queue full\), "
                     r"rejected (\d+), unsent (\d+)")


def _daemon(make_daemon, url, *extra, prom=True):
    args = ["--remote_write_url", url, "--remote_write_interval_s", "1", *extra]
    port = None
    if prom:
        port = free_port()
        args += ["--use_prometheus", "--prometheus_port", str(port)]
    d = make_daemon(extra=args)
    d.prom_port = port
    d.wait_log("remote write: pushing to")
    return d


def _summary(d):
    assert d.stop() == 0
    m = SUMMARY.search(d.log())
    assert m, d.log()[-3000:]
    return tuple(int(x) for x in m.groups())


def _served(d):
    assert "processes" in rpc_json(d.port, {"fn": "getStatus"})
    with IpcClient(d.sockdir) as c:
        assert c.register(npu=0, timeout=5) is not None


def _metric(d, name, **labels):
    lab = frozenset({"host_name": HOST, **labels}.items())
    return samples(scrape(d.prom_port)[2]).get((name, lab))


def _wait(pred, what, timeout=60.0):
    return wait_until(pred, timeout, what, interval=0.1)


def test_values_arrive_through_remote_write(make_daemon):
    p = PromServer(tempfile.mkdtemp(prefix="mmp"))
    try:
        d = _daemon(make_daemon, p.write_url, prom=False)
        # the job names its pod as the Kubernetes downward API would (docs/deploy.md#attribution)
        w = _run_job(d, {"POD_NAME": "trainer-rw-0", "POD_NAMESPACE": "ml", "CONTAINER_NAME": "trainer"})
        tot, _ = kernel_truth(w.ground_truth())
        name = max(tot, key=tot.get)
        res = p.wait_query(f'npu_op_total_ns{{kind="Kernel",name="{name}"}}')
        assert len(res) == 1
        # pushed series carry exactly our labels (no instance: nothing scraped them), with the
        # sender's kernel-reported pid and, where its status reports gave one, its job; and
        # the pod, namespace and container the process reported
        got = dict(res[0]["metric"])
        assert got.pop("pid") == str(w.p.pid), res[0]["metric"]
        got.pop("job", None)
        assert got == {"__name__": "npu_op_total_ns", "host_name": HOST, "device": "0",
                       "kind": "Kernel", "name": name, "pod": "trainer-rw-0", "namespace": "ml",
                       "container": "trainer"}
        assert float(res[0]["value"][1]) == tot[name]
        res = p.wait_query('count(npu_op_total_ns{kind="Kernel"})', lambda r: r and int(r[0]["value"][1]) == len(tot))
        for n, v in tot.items():
            res = p.query(f'npu_op_total_ns{{kind="Kernel",name="{n}"}}')
            assert float(res[0]["value"][1]) == v, n
        produced, sent, dropped, rejected, unsent = _summary(d)
        assert dropped == rejected == 0
        assert produced == sent + unsent
        # every sample the daemon counted as sent is stored, once
        assert p.count_samples('{host_name!=""}') == sent
    finally:
        p.stop()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_outage_buffers_then_delivers_and_counts_drops(make_daemon, sig):
    p = PromServer(tempfile.mkdtemp(prefix="mmp"))
    stopped = False
    qbound = 100
    try:
        # the kernel monitor's first cycle (at start) and the daemon's own series: the same S
        # series in every 1 s snapshot; the queue holds qbound // S snapshots
        d = _daemon(make_daemon, p.write_url, "--remote_write_queue_samples", str(qbound),
                    "--kernel_monitor_reporting_interval_s", "3600")
        p.wait_query('msmonitor_remote_write_up == 1')
        p.stop(sig)
        stopped = True
        d.wait_log("unreachable (", timeout=30)
        drops = lambda: _metric(d, "msmonitor_remote_write_dropped_samples", reason="queue_full") or 0
        _wait(lambda: drops() > 0, "queue-full drops")
        first = drops()
        _wait(lambda: drops() >= 2 * first, "more queue-full drops")
        p.start()
        stopped = False
        d.wait_log("is back after", timeout=60)
        _wait(lambda: _metric(d, "msmonitor_remote_write_queue_samples") == 0, "the queue to drain")
        produced, sent, dropped, rejected, unsent = _summary(d)
        log = d.log()
        assert log.count("unreachable (") == 1 and log.count("is back after") == 1
        back = re.search(r"is back after [0-9.]+ s \((\d+) samples dropped", log)
        assert int(back.group(1)) == dropped > 0
        assert rejected == 0
        assert produced == sent + dropped + unsent
        # Prometheus holds exactly the samples counted as sent (the restart kept its WAL)
        assert p.count_samples('{host_name!=""}') == sent
        # every snapshot has the same S samples, stamped alike
        per_ts = collections.Counter()
        for r in p.query('{host_name!=""}[1d]'):
            for t, _ in r["values"]:
                per_ts[float(t)] += 1
        sizes = set(per_ts.values())
        assert len(sizes) == 1, per_ts
        S = sizes.pop()
        # msmonitor_remote_write_up is 0 in the snapshots taken while the receiver was away:
        # the buffered ones are stored right after the one gap in the 1 s cadence (at least
        # one, at most what the queue holds; one more may be the request that was in flight,
        # before the gap), and the gap is exactly the snapshots dropped from the full queue.
        vals = p.query('msmonitor_remote_write_up[1d]')[0]["values"]
        ts = [float(t) for t, _ in vals]
        assert sorted(per_ts) == ts
        zeros = [float(t) for t, v in vals if v == "0"]
        gaps = [(b - a, b) for a, b in zip(ts, ts[1:]) if b - a > 1.5]
        assert len(gaps) == 1, ts
        gap, after = gaps[0]
        assert dropped % S == 0 and round(gap) - 1 == dropped // S
        late = [t for t in zeros if t >= after]
        assert 1 <= len(late) <= qbound // S and len(zeros) - len(late) <= 1
        assert late == [t for t in ts if t >= after][:len(late)]
        assert produced == S * len(ts) + dropped + unsent
    finally:
        if not stopped:
            p.stop()


def test_refused_4xx_is_dropped_not_retried(make_daemon):
    r = FakeReceiver("status", 400, "out of order sample")
    try:
        d = _daemon(make_daemon, r.url, "--remote_write_headers", "Authorization=Bearer s3cret-token,X-Scope-OrgID=t1")
        _wait(lambda: len(r.requests) >= 4, "4 requests")
        _served(d)
        produced, sent, dropped, rejected, unsent = _summary(d)
        bodies = [b for _, b in r.requests]
        assert len(set(hashlib.sha256(b).hexdigest() for b in bodies)) == len(bodies)  # never resent
        h = r.requests[0][0]
        assert h["content-encoding"] == "snappy"
        assert h["content-type"] == "application/x-protobuf"
        assert h["x-prometheus-remote-write-version"] == "0.1.0"
        assert h["authorization"] == "Bearer s3cret-token" and h["x-scope-orgid"] == "t1"
        assert h["user-agent"].startswith("msmonitor-dynolog/")
        # the independent decoder reads every body: __name__ first, sorted labels, ms stamps
        n = 0
        for b in bodies:
            for labels, smp in decode_write_request(b):
                names = [k for k, _ in labels]
                assert names[0] == "__name__" and names == sorted(names)
                assert len(smp) == 1 and abs(smp[0][1] / 1000.0 - time.time()) < 3600
                n += 1
        assert rejected == n and sent == 0
        assert produced == rejected + dropped + unsent
        log = d.log()
        assert log.count("refused") == 1 and "HTTP 400: out of order sample" in log
        assert "s3cret" not in log
    finally:
        r.close()


def test_5xx_is_retried(make_daemon):
    r = FakeReceiver("status", 500, "boom")
    try:
        d = _daemon(make_daemon, r.url)
        _wait(lambda: len(r.requests) >= 3, "3 requests")
        _served(d)
        produced, sent, dropped, rejected, unsent = _summary(d)
        bodies = [b for _, b in r.requests]
        assert bodies[0] == bodies[1] == bodies[2]   # the same request again, after back-off
        assert sent == rejected == 0 and produced == dropped + unsent
        log = d.log()
        assert log.count("unreachable (HTTP 500: boom)") == 1
    finally:
        r.close()


@pytest.mark.parametrize("mode,reason", [("hang", "Operation timed out"), ("close_mid_body", "")])
def test_hanging_and_closing_receivers(make_daemon, mode, reason):
    r = FakeReceiver(mode)
    try:
        d = _daemon(make_daemon, r.url, "--remote_write_timeout_s", "1")
        d.wait_log("unreachable (" + reason, timeout=30)
        _wait(lambda: len(r.requests) >= 2, "a retry")
        _served(d)
        produced, sent, dropped, rejected, unsent = _summary(d)   # SIGTERM: clean exit 0
        assert sent == 0 and produced == dropped + rejected + unsent
        assert d.log().count("unreachable (") == 1
    finally:
        r.close()


def test_unresolvable_and_refused(make_daemon):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    for url, why in (("http://no-such-host.invalid/api/v1/write", "resolve"),
                     (f"http://127.0.0.1:{port}/api/v1/write", "connect")):
        d = _daemon(make_daemon, url)
        log = d.wait_log("unreachable (", timeout=30)
        assert why in log.split("unreachable (", 1)[1].split("\n", 1)[0].lower()
        _served(d)
        _summary(d)


def test_bad_flags_exit_1():
    for args, needle in ((["--remote_write_url", "ftp://x/y"], "'ftp://x/y'"),
                         (["--remote_write_url", "http://x/", "--remote_write_headers", "Content-Type=a"],
                          "'Content-Type'"),
                         (["--remote_write_url", "http://x/", "--remote_write_headers", "X-Tok=sec\x01ret"],
                          "'X-Tok'"),
                         (["--remote_write_queue_samples", "0"], "remote_write_queue_samples")):
        home = tempfile.mkdtemp(prefix="mmd", dir="/tmp")
        env = dict(os.environ, HOME=home, MSMONITOR_SOCKET_DIR=home)
        r = subprocess.run([binpath("dynolog"), "--port", str(free_port()), *args], env=env,
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 1, r.stderr
        assert needle in r.stderr, r.stderr
        assert "ret" not in r.stderr.split("X-Tok", 1)[-1] if "X-Tok" in needle else True


def _tls_files(tmp):
    """A CA and a server certificate for 127.0.0.1 made with the openssl CLI."""
    ca_key, ca, key, csr, crt = (os.path.join(tmp, n) for n in ("ca.key", "ca.pem", "srv.key", "srv.csr", "srv.pem"))
    ext = os.path.join(tmp, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True, timeout=60)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca, "-days", "2",
        "-subj", "/CN=msmonitor test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1")
    run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", crt, "-days", "2",
        "-extfile", ext)
    web = os.path.join(tmp, "web.yml")
    with open(web, "w") as f:
        f.write(f"tls_server_config:\n  cert_file: {crt}\n  key_file: {key}\n")
    return ca, web


def test_tls_receiver(make_daemon):
    tmp = tempfile.mkdtemp(prefix="mmp")
    ca, web = _tls_files(tmp)
    p = PromServer(tmp, web_config=web)
    try:
        assert p.write_url.startswith("https://")
        # the system store does not know our CA: a verification failure, retried, logged once
        d = _daemon(make_daemon, p.write_url, prom=False)
        log = d.wait_log("unreachable (", timeout=30)
        assert "certificate" in log.split("unreachable (", 1)[1].split("\n", 1)[0].lower()
        _served(d)
        _summary(d)
        # with --remote_write_ca_file the samples arrive
        d = _daemon(make_daemon, p.write_url, "--remote_write_ca_file", ca, prom=False)
        p.wait_query("msmonitor_prometheus_series")
        produced, sent, dropped, rejected, unsent = _summary(d)
        assert sent > 0 and p.count_samples('{host_name!=""}') == sent
    finally:
        p.stop()


def test_without_libcurl_remote_write_is_refused(tmp_path):
    """libcurl is loaded at run time: a host without it gets one clear line and exit 1."""
    (tmp_path / "libcurl.so.4").write_bytes(b"not an ELF file")
    home = tempfile.mkdtemp(prefix="mmd", dir="/tmp")
    env = dict(os.environ, HOME=home, MSMONITOR_SOCKET_DIR=home, LD_LIBRARY_PATH=str(tmp_path))
    r = subprocess.run([binpath("dynolog"), "--port", str(free_port()), "--remote_write_url", "http://127.0.0.1:9/"],
                       env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert "remote write needs libcurl: cannot load libcurl.so.4" in r.stderr, r.stderr
